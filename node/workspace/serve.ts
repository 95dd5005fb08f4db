import {
  MAX_MANIFEST_FILES_PER_FRAME,
  MAX_WORKSPACE_FRAME_BYTES,
  WORKSPACE_PROTOCOL,
  type WorkspaceReply,
  WorkspaceRequest,
} from '../../protocol/workspace.ts';
import { createSemaphore } from '../async/semaphore.ts';
import { sleep } from '../async/sleep.ts';
import { logger } from '../logger.ts';
import type { Framed } from '../wire/framed.ts';
import { handleFramed, type StreamHost } from '../wire/streams.ts';
import { readChunk, type ServedWorkspace } from './manifest.ts';
import { createPacer } from './pacer.ts';

const log = logger('vtnode:workspace:serve');

export interface WorkspaceServerOptions {
  /** Host whose /vtnode/workspace/1 streams are served. */
  host: StreamHost;
  /** The workspaces served now, by content id (read on every request, so workspaces may be added later). */
  workspaces: () => ReadonlyMap<string, ServedWorkspace>;
  /** Chunk requests served at once across all peers; more are refused `busy` (default 4). */
  maxConcurrent?: number;
  /** Bandwidth cap over all streams, bytes per second of chunk data (default none). */
  bytesPerSecond?: number;
  /** Concurrent inbound streams per connection (default 8). */
  maxInboundStreams?: number;
  /** The clock (default Date.now). */
  now?: () => number;
}

export interface WorkspaceServer {
  /** Unregisters the protocol handler. */
  stop(): Promise<void>;
}

type Wire = Framed<WorkspaceRequest, WorkspaceReply>;

/**
 * Serves /vtnode/workspace/1: one request per stream, a manifest page or the chunks asked for (each
 * re-hashed as read; a request naming a chunk the workspace does not have is refused whole). A
 * malformed request gets the stream reset (and counts as an offence where streams are guarded).
 */
export async function createWorkspaceServer(options: WorkspaceServerOptions): Promise<WorkspaceServer> {
  const { host } = options;
  const slots = createSemaphore(options.maxConcurrent ?? 4);
  const pacer = createPacer(options.bytesPerSecond);
  const now = options.now ?? Date.now;

  const serveChunks = async (wire: Wire, served: ServedWorkspace, hashes: string[]) => {
    if (slots.running >= slots.permits) {
      await wire.send({
        kind: 'refused',
        code: 'busy',
        message: `serving ${slots.running} requests already`,
      });
      return;
    }
    const release = await slots.acquire();
    try {
      const unknown = hashes.filter((h) => !served.chunks.has(h));
      if (unknown.length > 0) {
        await wire.send({ kind: 'refused', code: 'unknown-chunk', message: `no chunk ${unknown[0]}` });
        return;
      }
      log('%s asked for %d chunks of %s', wire.peer, hashes.length, served.manifest.id);
      for (const hash of hashes) {
        const bytes = await readChunk(served, hash);
        if (!bytes) throw new Error(`chunk ${hash} vanished`);
        await sleep(pacer.reserve(bytes.length, now()));
        await wire.send({ kind: 'chunk', hash, data: bytes.toString('base64') });
      }
    } finally {
      release();
    }
  };

  await handleFramed<typeof WorkspaceRequest, WorkspaceReply>(
    host,
    WORKSPACE_PROTOCOL,
    async (wire) => {
      const req = await wire.expect('a workspace request');
      const served = options.workspaces().get(req.id);
      if (!served) {
        await wire.send({ kind: 'refused', code: 'unknown-workspace', message: `no workspace ${req.id}` });
        return;
      }
      if (req.kind === 'manifest') {
        const { manifest } = served;
        const files = manifest.files.slice(req.from, req.from + MAX_MANIFEST_FILES_PER_FRAME);
        log('%s asked for the manifest of %s from %d', wire.peer, req.id, req.from);
        await wire.send({
          kind: 'manifest',
          id: manifest.id,
          chunkBytes: manifest.chunkBytes,
          total: manifest.files.length,
          from: req.from,
          files,
        });
      } else {
        await serveChunks(wire, served, req.hashes);
      }
    },
    {
      schema: WorkspaceRequest,
      maxFrameBytes: MAX_WORKSPACE_FRAME_BYTES,
      maxInboundStreams: options.maxInboundStreams ?? 8,
    },
  );
  return { stop: () => host.unhandle(WORKSPACE_PROTOCOL) };
}
