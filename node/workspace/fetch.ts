import { chmod, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { peerIdFromString } from '@libp2p/peer-id';
import { z } from 'zod';
import { ParseError, parseJsonWith } from '../../protocol/parse.ts';
import { Sha256Id } from '../../protocol/task.ts';
import {
  checkChunk,
  MAX_CHUNKS_PER_REQUEST,
  MAX_WORKSPACE_FRAME_BYTES,
  type Manifest,
  ManifestFile,
  manifestProblems,
  sha256Of,
  WORKSPACE_PROTOCOL,
  WorkspaceReply,
  type WorkspaceRequest,
} from '../../protocol/workspace.ts';
import { pause } from '../async/sleep.ts';
import { logger } from '../logger.ts';
import { FrameError } from '../wire/framed.ts';
import { dialFramed, type StreamHost } from '../wire/streams.ts';

const log = logger('vtnode:workspace:fetch');

/** Pause before a holder that answered `busy` is asked again, ms. */
const BUSY_PAUSE_MS = 300;

export interface FetchWorkspaceOptions {
  /** Host that dials the holders. */
  host: StreamHost;
  /** Content id of the workspace wanted. */
  id: string;
  /**
   * Peer ids of the nodes that advertise it: a list, or a function asked again while the fetch runs,
   * so that holders that appear later (adverts arrive one by one) join in.
   */
  holders: readonly string[] | (() => readonly string[]);
  /** With chunks missing and every holder so far dropped, how long to wait for a new one, ms (default 30 s). */
  holderWaitMs?: number;
  /** The workspaces dir (`<data dir>/workspaces`): the result lands in `<dir>/<hex of id>/`. */
  dir: string;
  /** Called when a holder breaks the protocol (a manifest that is not the id, bytes that are not the chunk). */
  onOffence?: (peer: string, why: string) => void;
  /** Requests in flight per holder (default 2). */
  perHolder?: number;
  /** Chunks per request (default 8, at most MAX_CHUNKS_PER_REQUEST). */
  chunksPerRequest?: number;
  /** Longest one request may take, ms (default 60 s). */
  requestTimeoutMs?: number;
  /** Aborts the fetch; what arrived stays on disk for the next attempt. */
  signal?: AbortSignal;
}

export interface FetchedWorkspace {
  /** Where the files are. */
  root: string;
  /** The verified manifest. */
  manifest: Manifest;
  /** Chunks fetched now. */
  fetched: number;
  /** Chunks found on disk from an earlier attempt, verified, not fetched again. */
  reused: number;
  /** Holders dropped, and why. */
  dropped: { peer: string; why: string }[];
}

/** A holder that broke the protocol: dropped, and an offence. */
class HolderOffence extends Error {}
/** A holder that is serving others now: its batch is retried later. */
class HolderBusy extends Error {}

/** The directory name of a workspace in the workspaces dir. */
export function workspaceDirName(id: string): string {
  return Sha256Id.parse(id).slice('sha256:'.length);
}

const SavedManifest = z.object({
  id: Sha256Id,
  chunkBytes: z.number().int().min(1),
  files: z.array(ManifestFile),
});

async function request(
  host: StreamHost,
  peer: string,
  req: WorkspaceRequest,
  signal: AbortSignal,
  onReply: (reply: WorkspaceReply) => Promise<boolean>,
): Promise<void> {
  const wire = await dialFramed<typeof WorkspaceReply, WorkspaceRequest>(
    host,
    peerIdFromString(peer),
    WORKSPACE_PROTOCOL,
    { schema: WorkspaceReply, maxFrameBytes: MAX_WORKSPACE_FRAME_BYTES, signal },
  );
  try {
    await wire.send(req, { signal });
    await wire.closeWrite({ signal });
    for (;;) {
      const reply = await wire.read({ signal });
      if (reply === undefined)
        throw new FrameError('ended', peer, WORKSPACE_PROTOCOL, 'closed before replying in full');
      if (reply.kind === 'refused') {
        const why = `${peer} refused: ${reply.code} (${reply.message})`;
        throw reply.code === 'busy' ? new HolderBusy(why) : new Error(why);
      }
      if (!(await onReply(reply))) break;
    }
    await wire.close({ signal }).catch(() => {});
  } catch (err) {
    wire.abort(err as Error);
    if (
      err instanceof ParseError ||
      (err instanceof FrameError && (err.code === 'too-large' || err.code === 'truncated'))
    )
      throw new HolderOffence(err.message);
    throw err;
  }
}

/** The whole manifest from one holder, checked against the id (a HolderOffence when it is not the id). */
async function fetchManifest(
  host: StreamHost,
  peer: string,
  id: string,
  signal: AbortSignal,
): Promise<Manifest> {
  const files: ManifestFile[] = [];
  let chunkBytes = 0;
  let total = -1;
  while (total < 0 || files.length < total) {
    await request(host, peer, { v: 1, kind: 'manifest', id, from: files.length }, signal, async (page) => {
      if (page.kind !== 'manifest') throw new HolderOffence(`sent a ${page.kind} for a manifest request`);
      if (
        page.from !== files.length ||
        (total >= 0 && (page.total !== total || page.chunkBytes !== chunkBytes))
      )
        throw new HolderOffence('sent an inconsistent manifest page');
      if (page.files.length === 0 && files.length < page.total)
        throw new HolderOffence('sent an empty manifest page');
      total = page.total;
      chunkBytes = page.chunkBytes;
      files.push(...page.files);
      return false;
    });
  }
  const manifest = { id, chunkBytes, files: files.slice(0, total) };
  const problems = manifestProblems(manifest, id);
  if (problems.length > 0)
    throw new HolderOffence(`sent a manifest that is not ${id}: ${problems.slice(0, 3).join('; ')}`);
  return manifest;
}

/** Chunks of `wanted` already on disk in `chunkDir` whose bytes still hash to their name. */
async function chunksOnDisk(chunkDir: string, wanted: Set<string>): Promise<Set<string>> {
  const have = new Set<string>();
  for (const name of await readdir(chunkDir).catch(() => [] as string[])) {
    if (!wanted.has(name)) continue;
    const bytes = await readFile(join(chunkDir, name));
    if (sha256Of(bytes) === name) have.add(name);
    else await rm(join(chunkDir, name), { force: true });
  }
  return have;
}

/** Writes the files of a manifest from its chunks into `tree`, each checked against its sha256. */
async function assemble(manifest: Manifest, chunkDir: string, tree: string): Promise<string | null> {
  await rm(tree, { recursive: true, force: true });
  for (const f of manifest.files) {
    if (f.withheld) continue;
    const parts = await Promise.all(f.chunks.map((h) => readFile(join(chunkDir, h))));
    const bytes = Buffer.concat(parts);
    if (bytes.length !== f.size || sha256Of(bytes) !== f.sha256) return f.path;
    const path = join(tree, f.path);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, bytes, { mode: f.exec ? 0o755 : 0o644 });
    await chmod(path, f.exec ? 0o755 : 0o644);
  }
  return null;
}

interface ChunkFetch {
  host: StreamHost;
  id: string;
  /** Where verified chunks are kept, each named by its hash. */
  chunkDir: string;
  signal: AbortSignal;
  /** A signal for one request: the fetch's, with the request timeout. */
  timeout: () => AbortSignal;
  /** The holders now (asked again after each batch and every second). */
  holders: () => readonly string[];
  /** Holders in use: a dropped one leaves this set and is never asked again. */
  live: Set<string>;
  /** Holders dropped so far (before the chunks, for their manifest). */
  dropped: readonly { peer: string }[];
  drop: (peer: string, err: unknown) => void;
  perHolder: number;
  perRequest: number;
  holderWaitMs: number;
}

/**
 * Fetches the chunks in `queue` from the holders, `perHolder` requests in flight each, writing each
 * verified chunk to disk; a chunk that did not arrive goes back on the queue for another holder.
 * Holders that appear while it runs join in. Returns the number fetched; what is left in `queue`
 * when it returns had no holder (every one dropped, none new within `holderWaitMs`).
 */
async function fetchChunks(c: ChunkFetch, queue: string[]): Promise<number> {
  let fetched = 0;
  let inFlight = 0;
  let wake: (() => void) | null = null;
  let changed = new Promise<void>((r) => (wake = r));
  const notify = () => {
    wake?.();
    changed = new Promise<void>((r) => (wake = r));
  };

  const batchFrom = async (peer: string, batch: string[], done: Set<string>) => {
    let next = 0;
    await request(
      c.host,
      peer,
      { v: 1, kind: 'chunks', id: c.id, hashes: batch },
      c.timeout(),
      async (reply) => {
        if (reply.kind !== 'chunk') throw new HolderOffence(`sent a ${reply.kind} for a chunk request`);
        const want = batch[next++];
        if (want === undefined) throw new HolderOffence('sent more chunks than asked for');
        const checked = checkChunk(reply, want);
        if ('problem' in checked) throw new HolderOffence(checked.problem);
        await writeFile(join(c.chunkDir, `${want}.tmp`), checked.bytes);
        await rename(join(c.chunkDir, `${want}.tmp`), join(c.chunkDir, want));
        done.add(want);
        fetched++;
        return next < batch.length;
      },
    );
  };
  const worker = async (peer: string) => {
    while (c.live.has(peer) && !c.signal.aborted) {
      if (queue.length === 0) {
        if (inFlight === 0) return;
        await changed;
        continue;
      }
      const batch = queue.splice(0, c.perRequest);
      const done = new Set<string>();
      inFlight++;
      let busy = false;
      try {
        await batchFrom(peer, batch, done);
      } catch (err) {
        if (c.signal.aborted) return;
        busy = err instanceof HolderBusy;
        if (!busy) c.drop(peer, err);
      } finally {
        queue.push(...batch.filter((h) => !done.has(h)));
        inFlight--;
        notify();
      }
      if (busy) await pause(BUSY_PAUSE_MS, c.signal);
    }
  };

  const known = new Set(c.dropped.map((d) => d.peer));
  const running: Promise<void>[] = [];
  const recruit = () => {
    for (const peer of [...c.live, ...c.holders()]) {
      if (known.has(peer)) continue;
      known.add(peer);
      c.live.add(peer);
      for (let i = 0; i < c.perHolder; i++) running.push(worker(peer));
    }
  };
  // Wakes the loop below every second (to look for new holders) and at once on an abort.
  const tick = setInterval(notify, 1000);
  c.signal.addEventListener('abort', notify);
  try {
    let alone: number | null = null;
    for (;;) {
      c.signal.throwIfAborted();
      recruit();
      if (queue.length === 0 && inFlight === 0) break;
      if (c.live.size > 0) alone = null;
      else {
        alone ??= Date.now();
        if (Date.now() - alone >= c.holderWaitMs) break;
      }
      await changed;
    }
  } finally {
    clearInterval(tick);
    c.signal.removeEventListener('abort', notify);
    // Also on an abort: no worker may still write a chunk once the fetch has settled.
    await Promise.allSettled(running);
  }
  await Promise.all(running);
  c.signal.throwIfAborted();
  return fetched;
}

/**
 * Fetches workspace `id` from its holders into `<dir>/<hex>/`: the manifest from the first holder
 * whose manifest hashes to the id, then every chunk from all holders at once, each verified on
 * arrival and kept in `<dir>/.partial-<hex>/` (so an aborted or failed fetch resumes where it
 * stopped), then the files are assembled, checked against their hashes and the tree renamed into
 * place at once. A holder that fails (dies, refuses, times out) is dropped and its chunks fetched
 * from the others; one that sends a bad manifest or bad bytes is dropped and reported to onOffence.
 * Throws when no holder is left with chunks still missing.
 */
export async function fetchWorkspace(options: FetchWorkspaceOptions): Promise<FetchedWorkspace> {
  const { host, id, dir } = options;
  const signal = options.signal ?? new AbortController().signal;
  const hex = workspaceDirName(id);
  const root = join(dir, hex);
  const partial = join(dir, `.partial-${hex}`);
  const chunkDir = join(partial, 'chunks');
  await mkdir(chunkDir, { recursive: true });
  const dropped: { peer: string; why: string }[] = [];
  const currentHolders =
    typeof options.holders === 'function' ? options.holders : () => options.holders as readonly string[];
  const live = new Set(currentHolders());
  const drop = (peer: string, err: unknown) => {
    if (!live.delete(peer)) return;
    const why = (err as Error)?.message ?? String(err);
    dropped.push({ peer, why });
    log.warn('dropping workspace holder %s: %s', peer, why);
    if (err instanceof HolderOffence) options.onOffence?.(peer, why);
  };
  const timeout = () => AbortSignal.any([signal, AbortSignal.timeout(options.requestTimeoutMs ?? 60_000)]);

  // 1. The manifest: saved from an earlier attempt (re-checked), else from the first honest holder.
  const saved = join(partial, 'manifest.json');
  let manifest: Manifest | null = null;
  let manifestFrom: string | null = null;
  const text = await readFile(saved, 'utf8').catch(() => null);
  if (text !== null) {
    try {
      const m = parseJsonWith(SavedManifest, text, saved);
      if (manifestProblems(m, id).length === 0) manifest = m;
    } catch {}
  }
  for (const peer of live) {
    if (manifest) break;
    signal.throwIfAborted();
    try {
      manifest = await fetchManifest(host, peer, id, timeout());
      manifestFrom = peer;
      await writeFile(`${saved}.tmp`, JSON.stringify(manifest));
      await rename(`${saved}.tmp`, saved);
    } catch (err) {
      signal.throwIfAborted();
      drop(peer, err);
    }
  }
  if (!manifest) throw new Error(`workspace ${id}: no holder served its manifest (${describe(dropped)})`);

  // 2. The chunks: those on disk are kept, the rest shared out among the live holders.
  const wanted = new Set(manifest.files.flatMap((f) => f.chunks));
  const have = await chunksOnDisk(chunkDir, wanted);
  const reused = have.size;
  const queue = [...wanted].filter((h) => !have.has(h));
  const fetched = await fetchChunks(
    {
      host,
      id,
      chunkDir,
      signal,
      timeout,
      holders: currentHolders,
      live,
      dropped,
      drop,
      perHolder: Math.max(1, options.perHolder ?? 2),
      perRequest: Math.min(MAX_CHUNKS_PER_REQUEST, Math.max(1, options.chunksPerRequest ?? 8)),
      holderWaitMs: options.holderWaitMs ?? 30_000,
    },
    queue,
  );
  if (queue.length > 0)
    throw new Error(
      `workspace ${id}: ${queue.length} chunks missing and no holder left (${describe(dropped)})`,
    );

  // 3. Assemble, check every file, and move the tree into place at once.
  const tree = join(partial, 'tree');
  const bad = await assemble(manifest, chunkDir, tree);
  if (bad !== null) {
    // The chunks matched the manifest's chunk hashes but not the file's hash (which the id covers):
    // the manifest lied about its chunks. Start over next time, without that holder.
    await rm(partial, { recursive: true, force: true });
    const why = `sent a manifest whose chunks of ${bad} do not make its sha256`;
    if (manifestFrom) drop(manifestFrom, new HolderOffence(why));
    throw new Error(`workspace ${id}: ${why}`);
  }
  await rm(root, { recursive: true, force: true });
  await writeFile(manifestPath(dir, id), JSON.stringify(manifest));
  await rename(tree, root);
  await rm(partial, { recursive: true, force: true });
  log('fetched workspace %s into %s: %d chunks fetched, %d reused', id, root, fetched, reused);
  return { root, manifest, fetched, reused, dropped };
}

function describe(dropped: { peer: string; why: string }[]): string {
  return dropped.length ? dropped.map((d) => `${d.peer}: ${d.why}`).join('; ') : 'no holders';
}

/** Where the verified manifest of a fetched workspace is kept: beside its tree, never in it. */
export function manifestPath(dir: string, id: string): string {
  return join(dir, `${workspaceDirName(id)}.manifest.json`);
}

/** The verified manifest of workspace `id` fetched earlier into the workspaces dir `dir`, or null. */
export async function fetchedManifest(dir: string, id: string): Promise<Manifest | null> {
  const path = manifestPath(dir, id);
  const text = await readFile(path, 'utf8').catch(() => null);
  if (text === null) return null;
  const m = parseJsonWith(SavedManifest, text, path);
  return manifestProblems(m, id).length === 0 ? m : null;
}
