import type { PeerId } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { type Digest, MAX_LOG_DIGESTS_PER_FRAME, MAX_LOG_FRAME_BYTES } from '../../protocol/digest.ts';
import {
  LogReply,
  LogRequest,
  type LostRange,
  MAX_LOST_RANGES_PER_REPLY,
  MAX_SAMPLE_IDS_PER_REQUEST,
  SampleReply,
  SampleRequest,
} from '../../protocol/fetch.ts';
import { MAX_SAMPLE_FRAME_BYTES } from '../../protocol/sample.ts';
import { LOG_PROTOCOL, SAMPLE_PROTOCOL } from '../../protocol/topics.ts';
import { logger } from '../logger.ts';
import { dialFramed, handleFramed, type StreamHost } from '../wire/streams.ts';

const log = logger('vtnode:digests:servers');

/** Something that holds sample bodies: a worker's sample log, a collector's dataset. */
export interface BodySource {
  /** Held samples by id, in the order asked, skipping unknown ids. */
  getMany(sampleIds: readonly string[]): SampleReply[];
}

/** Bodies from several sources (a node that is both worker and collector): the first that holds an id wins. */
export function combineSources(...sources: BodySource[]): BodySource {
  return {
    getMany(sampleIds) {
      const found = new Map<string, SampleReply>();
      for (const source of sources) {
        const wanted = sampleIds.filter((id) => !found.has(id));
        if (wanted.length === 0) break;
        for (const r of source.getMany(wanted)) found.set(r.body.sampleId, r);
      }
      return sampleIds.flatMap((id) => (found.has(id) ? [found.get(id)!] : []));
    },
  };
}

/** Something that holds this node's own digests by sequence number: a worker's sample log. */
export interface DigestSource {
  digestsSince(after: number, limit: number): Digest[];
  counts(): { highWater: number };
  /** Seq ranges the log lost that end after `after`, ascending, at most `limit` (sample-log.ts), if it tracks any. */
  lostSince?(after: number, limit: number): LostRange[];
}

export interface SampleServerOptions {
  /** Host whose /vtnode/sample/1 streams are served. */
  host: StreamHost;
  /** Where bodies come from (a SampleLog fits). */
  source: BodySource;
  /** Concurrent fetch streams per connection (default 8). */
  maxInboundStreams?: number;
}

export interface Server {
  /** Unregisters the protocol handler. */
  stop(): Promise<void>;
}

/**
 * Serves /vtnode/sample/1: one request of at most MAX_SAMPLE_IDS_PER_REQUEST ids, answered with
 * one frame per body held, then the stream closes. A malformed request gets the stream reset.
 */
export async function createSampleServer(options: SampleServerOptions): Promise<Server> {
  const { host, source } = options;
  await handleFramed<typeof SampleRequest, SampleReply>(
    host,
    SAMPLE_PROTOCOL,
    async (wire) => {
      const req = await wire.expect('a sample request');
      const found = source.getMany(req.sampleIds);
      log('%s asked for %d bodies, sending %d', wire.peer, req.sampleIds.length, found.length);
      for (const reply of found) await wire.send(reply);
    },
    {
      schema: SampleRequest,
      maxFrameBytes: MAX_SAMPLE_FRAME_BYTES,
      maxInboundStreams: options.maxInboundStreams ?? 8,
    },
  );
  return { stop: () => host.unhandle(SAMPLE_PROTOCOL) };
}

export interface LogServerOptions {
  /** Host whose /vtnode/log/1 streams are served. */
  host: StreamHost;
  /** This node's own digests (a SampleLog fits). */
  source: DigestSource;
}

/** Serves /vtnode/log/1: one request, one page of this node's digests after a seq. */
export async function createLogServer(options: LogServerOptions): Promise<Server> {
  const { host, source } = options;
  await handleFramed<typeof LogRequest, LogReply>(
    host,
    LOG_PROTOCOL,
    async (wire) => {
      const req = await wire.expect('a log request');
      const digests = source.digestsSince(req.after, req.limit);
      // Every lost range while they fit (a collector holding a seq since lost must learn so, however
      // far back it is), else those after the asked seq (which catch-up needs to move on).
      let lost = source.lostSince?.(0, MAX_LOST_RANGES_PER_REPLY + 1) ?? [];
      if (lost.length > MAX_LOST_RANGES_PER_REPLY)
        lost = source.lostSince!(req.after, MAX_LOST_RANGES_PER_REPLY);
      await wire.send({ digests, highWater: source.counts().highWater, ...(lost.length ? { lost } : {}) });
    },
    { schema: LogRequest, maxFrameBytes: MAX_LOG_FRAME_BYTES, maxInboundStreams: 8 },
  );
  return { stop: () => host.unhandle(LOG_PROTOCOL) };
}

export interface FetchOptions {
  signal?: AbortSignal;
}

function peerOf(peer: string | PeerId): PeerId {
  return typeof peer === 'string' ? peerIdFromString(peer) : peer;
}

/** Fetches bodies from a peer over /vtnode/sample/1 (ids beyond one request's cap are split). */
export async function fetchBodies(
  host: StreamHost,
  peer: string | PeerId,
  sampleIds: readonly string[],
  options: FetchOptions = {},
): Promise<SampleReply[]> {
  const out: SampleReply[] = [];
  for (let i = 0; i < sampleIds.length; i += MAX_SAMPLE_IDS_PER_REQUEST) {
    const batch = sampleIds.slice(i, i + MAX_SAMPLE_IDS_PER_REQUEST);
    const wire = await dialFramed<typeof SampleReply, SampleRequest>(host, peerOf(peer), SAMPLE_PROTOCOL, {
      schema: SampleReply,
      maxFrameBytes: MAX_SAMPLE_FRAME_BYTES,
      signal: options.signal,
    });
    try {
      await wire.send({ v: 1, sampleIds: batch });
      await wire.closeWrite();
      const asked = new Set(batch);
      for await (const reply of wire) {
        if (!asked.has(reply.body.sampleId))
          throw new Error(`${wire.peer} sent sample ${reply.body.sampleId}, which was not asked for`);
        asked.delete(reply.body.sampleId);
        out.push(reply);
      }
    } catch (err) {
      wire.abort(err as Error);
      throw err;
    }
  }
  return out;
}

/** One page of a peer's own digests after `after` over /vtnode/log/1. */
export async function fetchDigests(
  host: StreamHost,
  peer: string | PeerId,
  after: number,
  limit = MAX_LOG_DIGESTS_PER_FRAME,
  options: FetchOptions = {},
): Promise<LogReply> {
  const wire = await dialFramed<typeof LogReply, LogRequest>(host, peerOf(peer), LOG_PROTOCOL, {
    schema: LogReply,
    maxFrameBytes: MAX_LOG_FRAME_BYTES,
    signal: options.signal,
  });
  try {
    await wire.send({ v: 1, after, limit });
    await wire.closeWrite();
    const reply = await wire.expect('a log page');
    await wire.close();
    return reply;
  } catch (err) {
    wire.abort(err as Error);
    throw err;
  }
}
