import type { PeerId } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { MAX_LOG_DIGESTS_PER_FRAME, MAX_LOG_FRAME_BYTES, type SignedDigest } from '../../protocol/digest.ts';
import {
  type DigestsReply,
  LogReply,
  LogRequest,
  type LostRange,
  MAX_LOST_RANGES_PER_REPLY,
  MAX_ORIGINS_PER_FRAME,
  MAX_SAMPLES_PER_REQUEST,
  type OriginSummary,
  type SampleKey,
  SampleReply,
  SampleRequest,
} from '../../protocol/fetch.ts';
import { MAX_SAMPLE_FRAME_BYTES } from '../../protocol/sample.ts';
import { LOG_PROTOCOL, SAMPLE_PROTOCOL } from '../../protocol/topics.ts';
import { logger } from '../logger.ts';
import { dialFramed, handleFramed, type StreamHost } from '../wire/streams.ts';
import type { SampleLog } from '../worker/sample-log.ts';

const log = logger('vtnode:digests:servers');

const keyOf = (k: SampleKey) => `${k.origin}#${k.seq}`;

/** Something that holds sample bodies by (origin, seq): a worker's sample log, a collector's dataset. */
export interface BodySource {
  /** The rows held among `keys`, in the order asked, skipping rows not held. */
  getRows(keys: readonly SampleKey[]): SampleReply[];
}

/** A worker's sample log as a body source: it holds its own rows only. */
export function logBodies(sampleLog: Pick<SampleLog, 'origin' | 'bySeq'>): BodySource {
  return {
    getRows(keys) {
      const seqs = keys.filter((k) => k.origin === sampleLog.origin).map((k) => k.seq);
      return sampleLog.bySeq(seqs).map((s) => ({ origin: s.origin, seq: s.seq, body: s.body }));
    },
  };
}

/** Bodies from several sources (a node that is both worker and collector): the first that holds a row wins. */
export function combineSources(...sources: BodySource[]): BodySource {
  return {
    getRows(keys) {
      const found = new Map<string, SampleReply>();
      for (const source of sources) {
        const wanted = keys.filter((k) => !found.has(keyOf(k)));
        if (wanted.length === 0) break;
        for (const r of source.getRows(wanted)) found.set(keyOf(r), r);
      }
      return keys.flatMap((k) => (found.has(keyOf(k)) ? [found.get(keyOf(k))!] : []));
    },
  };
}

/** Something that holds signed digests: a worker's sample log (its own), a collector's dataset (every origin's). */
export interface DigestSource {
  /** Origins held, ascending by peer id, those after `after` only, at most `limit`. */
  originSummaries(after: string | undefined, limit: number): OriginSummary[];
  /**
   * One origin's signed digests with seq greater than `after`, ascending, at most `limit`; an
   * origin's own log adds the seq ranges it lost (sample-log.ts), which only it may declare.
   */
  digestsOf(
    origin: string,
    after: number,
    limit: number,
  ): { digests: SignedDigest[]; highWater: number; lost?: LostRange[] };
}

/** A worker's sample log as a digest source: its own origin only, with the seq ranges it lost. */
export function logDigests(
  sampleLog: Pick<SampleLog, 'origin' | 'digestsSince' | 'counts' | 'lostSince'>,
): DigestSource {
  return {
    originSummaries(after, limit) {
      const { samples, highWater } = sampleLog.counts();
      // A log that lost every row still has seqs to declare lost: it stays listed.
      if (highWater === 0 || limit < 1 || (after !== undefined && sampleLog.origin <= after)) return [];
      return [{ origin: sampleLog.origin, highWater, maxSeq: highWater, count: samples }];
    },
    digestsOf(origin, after, limit) {
      if (origin !== sampleLog.origin) return { digests: [], highWater: 0 };
      // Every lost range while they fit (a collector holding a seq since lost must learn so, however
      // far back it is), else those after the asked seq (which catch-up needs to move on).
      let lost = sampleLog.lostSince(0, MAX_LOST_RANGES_PER_REPLY + 1);
      if (lost.length > MAX_LOST_RANGES_PER_REPLY)
        lost = sampleLog.lostSince(after, MAX_LOST_RANGES_PER_REPLY);
      return {
        digests: sampleLog.digestsSince(after, limit),
        highWater: sampleLog.counts().highWater,
        ...(lost.length ? { lost } : {}),
      };
    },
  };
}

export interface SampleServerOptions {
  /** Host whose /vtnode/sample/2 streams are served. */
  host: StreamHost;
  /** Where bodies come from (logBodies(sampleLog), a DatasetStore). */
  source: BodySource;
  /** Concurrent fetch streams per connection (default 8). */
  maxInboundStreams?: number;
}

export interface Server {
  /** Unregisters the protocol handler. */
  stop(): Promise<void>;
}

/**
 * Serves /vtnode/sample/2: one request of at most MAX_SAMPLES_PER_REQUEST (origin, seq) rows,
 * answered with one frame per row held, then the stream closes. A malformed request gets the
 * stream reset.
 */
export async function createSampleServer(options: SampleServerOptions): Promise<Server> {
  const { host, source } = options;
  await handleFramed<typeof SampleRequest, SampleReply>(
    host,
    SAMPLE_PROTOCOL,
    async (wire) => {
      const req = await wire.expect('a sample request');
      const found = source.getRows(req.samples);
      log('%s asked for %d bodies, sending %d', wire.peer, req.samples.length, found.length);
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
  /** Host whose /vtnode/log/2 streams are served. */
  host: StreamHost;
  /** The digests this node holds (logDigests(sampleLog), a DatasetStore). */
  source: DigestSource;
}

/**
 * Serves /vtnode/log/2: one request, one reply: a page of the origins this node holds digests of,
 * or a page of one origin's signed digests after a seq (its own or, on a collector, any origin's).
 */
export async function createLogServer(options: LogServerOptions): Promise<Server> {
  const { host, source } = options;
  await handleFramed<typeof LogRequest, LogReply>(
    host,
    LOG_PROTOCOL,
    async (wire) => {
      const req = await wire.expect('a log request');
      if (req.kind === 'origins') {
        const page = source.originSummaries(req.after, MAX_ORIGINS_PER_FRAME + 1);
        await wire.send({
          kind: 'origins',
          origins: page.slice(0, MAX_ORIGINS_PER_FRAME),
          more: page.length > MAX_ORIGINS_PER_FRAME,
        });
      } else {
        const { digests, highWater, lost } = source.digestsOf(req.origin, req.after, req.limit);
        await wire.send({ kind: 'digests', digests, highWater, ...(lost?.length ? { lost } : {}) });
      }
    },
    { schema: LogRequest, maxFrameBytes: MAX_LOG_FRAME_BYTES, maxInboundStreams: 8 },
  );
  return { stop: () => host.unhandle(LOG_PROTOCOL) };
}

export interface FetchOptions {
  /** Aborts the fetch. */
  signal?: AbortSignal;
  /**
   * Longest one request may take, ms (default 60 s): a peer that accepts the stream and never
   * answers fails the fetch (the caller tries another holder, or the next catch-up) instead of
   * holding it, and the caller's fetch slot, forever.
   */
  timeoutMs?: number;
}

const DEFAULT_FETCH_TIMEOUT_MS = 60_000;

/** The signal of one request: the caller's, and its own time limit. */
function requestSignal(options: FetchOptions): AbortSignal {
  const limit = AbortSignal.timeout(options.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS);
  return options.signal ? AbortSignal.any([options.signal, limit]) : limit;
}

function peerOf(peer: string | PeerId): PeerId {
  return typeof peer === 'string' ? peerIdFromString(peer) : peer;
}

/**
 * Fetches exact rows from a peer over /vtnode/sample/2 (rows beyond one request's cap are split).
 * A reply for a row that was not asked for, or twice, is a protocol error: the fetch throws.
 */
export async function fetchBodies(
  host: StreamHost,
  peer: string | PeerId,
  keys: readonly SampleKey[],
  options: FetchOptions = {},
): Promise<SampleReply[]> {
  const out: SampleReply[] = [];
  for (let i = 0; i < keys.length; i += MAX_SAMPLES_PER_REQUEST) {
    const batch = keys.slice(i, i + MAX_SAMPLES_PER_REQUEST).map((k) => ({ origin: k.origin, seq: k.seq }));
    const wire = await dialFramed<typeof SampleReply, SampleRequest>(host, peerOf(peer), SAMPLE_PROTOCOL, {
      schema: SampleReply,
      maxFrameBytes: MAX_SAMPLE_FRAME_BYTES,
      signal: requestSignal(options),
    });
    try {
      await wire.send({ v: 2, samples: batch });
      await wire.closeWrite();
      const asked = new Set(batch.map(keyOf));
      for await (const reply of wire) {
        if (!asked.has(keyOf(reply)))
          throw new Error(`${wire.peer} sent sample ${keyOf(reply)}, which was not asked for (or twice)`);
        asked.delete(keyOf(reply));
        out.push(reply);
      }
    } catch (err) {
      wire.abort(err as Error);
      throw err;
    }
  }
  return out;
}

/** One /vtnode/log/2 exchange: a request, its one reply. */
async function askLog(
  host: StreamHost,
  peer: string | PeerId,
  request: LogRequest,
  options: FetchOptions,
): Promise<LogReply> {
  const wire = await dialFramed<typeof LogReply, LogRequest>(host, peerOf(peer), LOG_PROTOCOL, {
    schema: LogReply,
    maxFrameBytes: MAX_LOG_FRAME_BYTES,
    signal: requestSignal(options),
  });
  try {
    await wire.send(request);
    await wire.closeWrite();
    const reply = await wire.expect('a log reply');
    await wire.close();
    if (reply.kind !== request.kind)
      throw new Error(`${wire.peer} answered a ${request.kind} request with ${reply.kind}`);
    return reply;
  } catch (err) {
    wire.abort(err as Error);
    throw err;
  }
}

/** Most pages of origins read from one peer (MAX_ORIGINS_PER_FRAME each). */
const MAX_ORIGIN_PAGES = 100;

/** Every origin a peer holds digests of, with its summary, over /vtnode/log/2 (paged, bounded). */
export async function fetchOrigins(
  host: StreamHost,
  peer: string | PeerId,
  options: FetchOptions = {},
): Promise<OriginSummary[]> {
  const out: OriginSummary[] = [];
  let after: string | undefined;
  for (let page = 0; page < MAX_ORIGIN_PAGES; page++) {
    const reply = await askLog(host, peer, { v: 2, kind: 'origins', ...(after ? { after } : {}) }, options);
    if (reply.kind !== 'origins') break;
    const fresh = reply.origins.filter((o) => after === undefined || o.origin > after);
    out.push(...fresh);
    if (!reply.more || fresh.length === 0) break;
    after = fresh.at(-1)!.origin;
  }
  return out;
}

/**
 * One page of an origin's signed digests after `after` from a peer over /vtnode/log/2 (the origin
 * itself or any holder). The signatures are not checked here: see signature.ts checkRelayed.
 */
export async function fetchDigests(
  host: StreamHost,
  peer: string | PeerId,
  origin: string,
  after: number,
  limit = MAX_LOG_DIGESTS_PER_FRAME,
  options: FetchOptions = {},
): Promise<DigestsReply> {
  const reply = await askLog(host, peer, { v: 2, kind: 'digests', origin, after, limit }, options);
  if (reply.kind !== 'digests') throw new Error(`expected a digests reply, got ${reply.kind}`);
  return reply;
}
