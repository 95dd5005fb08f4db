import type { PeerId } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import {
  MAX_TASK_FRAME_BYTES,
  type TaskReply,
  TaskReply as TaskReplySchema,
  TaskRequest,
  taskPages,
} from '../../protocol/task-fetch.ts';
import { TASK_PROTOCOL } from '../../protocol/topics.ts';
import { logger } from '../logger.ts';
import { dialFramed, handleFramed, type StreamHost } from '../wire/streams.ts';
import type { FetchOptions, Server } from './servers.ts';

const log = logger('vtnode:digests:tasks');

/** Something that holds task rows by content hash: a worker's sample log, a collector's dataset. */
export interface TaskSource {
  /** The rows held among `hashes`, in the order asked, skipping rows not held. */
  getTaskRows(hashes: readonly string[]): TaskReply[];
}

/** Task rows from several sources (a node that is both worker and collector): the first that holds a row wins. */
export function combineTaskSources(...sources: TaskSource[]): TaskSource {
  return {
    getTaskRows(hashes) {
      const found = new Map<string, TaskReply>();
      for (const source of sources) {
        const wanted = hashes.filter((h) => !found.has(h));
        if (wanted.length === 0) break;
        for (const r of source.getTaskRows(wanted)) found.set(r.hash, r);
      }
      return hashes.flatMap((h) => (found.has(h) ? [found.get(h)!] : []));
    },
  };
}

export interface TaskServerOptions {
  /** Host whose /vtnode/task/1 streams are served. */
  host: StreamHost;
  /** Where rows come from (the sample log, a DatasetStore). */
  source: TaskSource;
  /** Concurrent fetch streams per connection (default 8). */
  maxInboundStreams?: number;
}

/**
 * Serves /vtnode/task/1: one request of at most MAX_TASKS_PER_REQUEST hashes, answered with one
 * frame per row held, then the stream closes. A malformed or oversized request gets the stream
 * reset (and counts as the peer's offence, node/wire/offences.ts).
 */
export async function createTaskServer(options: TaskServerOptions): Promise<Server> {
  const { host, source } = options;
  await handleFramed<typeof TaskRequest, TaskReply>(
    host,
    TASK_PROTOCOL,
    async (wire) => {
      const req = await wire.expect('a task request');
      const found = source.getTaskRows(req.hashes);
      log('%s asked for %d task rows, sending %d', wire.peer, req.hashes.length, found.length);
      for (const reply of found) await wire.send(reply);
    },
    {
      schema: TaskRequest,
      maxFrameBytes: MAX_TASK_FRAME_BYTES,
      maxInboundStreams: options.maxInboundStreams ?? 8,
    },
  );
  return { stop: () => host.unhandle(TASK_PROTOCOL) };
}

/**
 * Fetches task rows by hash from a peer over /vtnode/task/1, a page of MAX_TASKS_PER_REQUEST per
 * request. The rows are NOT checked against their hashes here (see task-fetch.ts taskRowMismatch):
 * the caller knows which hashes the signed digests name. A row served under a hash that was not asked
 * for, or twice, is a protocol error: the fetch throws.
 */
export async function fetchTaskRows(
  host: StreamHost,
  peer: string | PeerId,
  hashes: readonly string[],
  options: FetchOptions = {},
): Promise<TaskReply[]> {
  const out: TaskReply[] = [];
  const peerId = typeof peer === 'string' ? peerIdFromString(peer) : peer;
  for (const page of taskPages(hashes)) {
    const limit = AbortSignal.timeout(options.timeoutMs ?? 60_000);
    const wire = await dialFramed<typeof TaskReplySchema, TaskRequest>(host, peerId, TASK_PROTOCOL, {
      schema: TaskReplySchema,
      maxFrameBytes: MAX_TASK_FRAME_BYTES,
      signal: options.signal ? AbortSignal.any([options.signal, limit]) : limit,
    });
    try {
      await wire.send({ v: 1, hashes: page });
      await wire.closeWrite();
      const asked = new Set(page);
      for await (const reply of wire) {
        if (!asked.has(reply.hash))
          throw new Error(`${wire.peer} sent task row ${reply.hash}, which was not asked for (or twice)`);
        asked.delete(reply.hash);
        out.push(reply);
      }
    } catch (err) {
      wire.abort(err as Error);
      throw err;
    }
  }
  return out;
}
