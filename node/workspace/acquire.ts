import { readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Advert } from '../../protocol/advert.ts';
import type { Manifest } from '../../protocol/workspace.ts';
import { pause } from '../async/sleep.ts';
import { logger } from '../logger.ts';
import type { StreamHost } from '../wire/streams.ts';
import type { FetchingWorkspaces } from '../worker/executor.ts';
import type { WorkspaceCalibration } from './calibrate.ts';
import {
  chooseEvictions,
  diskBytes,
  removeWorkspaceFiles,
  type StoredWorkspace,
  touchedAt,
} from './evict.ts';
import { fetchedManifest, fetchWorkspace, manifestPath, workspaceDirName } from './fetch.ts';
import { installWorkspace } from './install.ts';
import { type ServedWorkspace, servedFromManifest } from './manifest.ts';

const log = logger('vtnode:workspace:acquire');

/** What a node needs of a fleet member's newest advert. */
export interface AdvertisedNode {
  advert: Pick<Advert, 'peerId' | 'workspaces'>;
  /** True for this node itself. */
  self: boolean;
}

/** The fleet's other nodes that advertise workspace `id`, sorted. Pure. */
export function holdersOf(nodes: readonly AdvertisedNode[], id: string): string[] {
  return nodes
    .filter((n) => !n.self && n.advert.workspaces.includes(id))
    .map((n) => n.advert.peerId)
    .sort();
}

/**
 * Workspaces the fleet's other nodes advertise that this node lacks, each with its holders, in a
 * stable order (most holders first, then by id). Skips those `skip` says (held, in progress, or
 * failed recently with these holders). Pure.
 */
export function wantedWorkspaces(
  nodes: readonly AdvertisedNode[],
  skip: (id: string, holders: readonly string[]) => boolean,
): { id: string; holders: string[] }[] {
  const holders = new Map<string, string[]>();
  for (const n of nodes) {
    if (n.self) continue;
    for (const id of n.advert.workspaces) holders.set(id, [...(holders.get(id) ?? []), n.advert.peerId]);
  }
  return [...holders.entries()]
    .map(([id, h]) => ({ id, holders: h.sort() }))
    .filter((w) => !skip(w.id, w.holders))
    .sort((a, b) => b.holders.length - a.holders.length || (a.id < b.id ? -1 : 1));
}

/** A fetch or install that failed: when, how many times in a row, and the holders it had. */
export interface FailedAttempt {
  at: number;
  attempts: number;
  holders: readonly string[];
}

/**
 * Whether a workspace whose last attempts failed is tried again now: once a holder it did not have
 * appears, or once its backoff is over (`firstMs`, doubling per failure in a row, at most `maxMs`).
 * A failure is often passing (a holder that left, the registry unreachable), so the first retry
 * comes soon. Pure.
 */
export function retryDue(
  failed: FailedAttempt,
  holders: readonly string[],
  now: number,
  backoff: { firstMs: number; maxMs: number },
): boolean {
  if (holders.some((h) => !failed.holders.includes(h))) return true;
  const wait = Math.min(backoff.maxMs, backoff.firstMs * 2 ** (failed.attempts - 1));
  return now - failed.at >= wait;
}

/** What the acquirer knows of one workspace when deciding whether to fetch it now. */
export interface WorkspaceState {
  /** Held already, or being fetched or installed now. */
  busy: boolean;
  /** The failed attempts in a row, if its last attempt failed. */
  failed?: FailedAttempt | undefined;
  /** When it was last evicted to stay under the size cap (ms), if it was. */
  evictedAt?: number | undefined;
}

/**
 * Whether a workspace the fleet advertises is fetched now: not when held or under way, not while a
 * failure's backoff runs (retryDue), and not within `maxMs` of its eviction for the size cap, so a
 * node whose cap fits fewer workspaces than the fleet advertises does not fetch and evict them in
 * turn. Pure.
 */
export function fetchDue(
  state: WorkspaceState,
  holders: readonly string[],
  now: number,
  backoff: { firstMs: number; maxMs: number },
): boolean {
  if (state.busy) return false;
  if (state.evictedAt !== undefined && now - state.evictedAt < backoff.maxMs) return false;
  return state.failed === undefined || retryDue(state.failed, holders, now, backoff);
}

export interface WorkspaceAcquirerOptions {
  /** Host that dials the holders. */
  host: StreamHost;
  /** The workspaces dir (`<data dir>/workspaces`). */
  dir: string;
  /** The fleet as this node sees it (the adverts' workspaces and their holders). */
  nodes: () => readonly AdvertisedNode[];
  /** Workspaces this node holds (content id → root); a ready fetched workspace is added here. */
  held: Map<string, string>;
  /** Workspaces this node serves; a ready fetched workspace is added here too. */
  served: Map<string, ServedWorkspace>;
  /** Called when a holder breaks the protocol. */
  onOffence?: (peer: string, why: string) => void;
  /**
   * The calibration sample run on an installed workspace before it is advertised (calibrate.ts);
   * throws when it fails. None: advertised once installed.
   */
  calibrate?: (root: string, signal: AbortSignal) => Promise<WorkspaceCalibration>;
  /** Called when what the node holds or is fetching changes (the advert). */
  onChange: () => void;
  /** How often the fleet's adverts are looked at, ms (default 5 s). */
  intervalMs?: number;
  /** First wait before a workspace whose fetch or install failed is tried again, ms (default 30 s; doubles per failure). */
  retryFirstMs?: number;
  /** Longest wait before a failed workspace is tried again, and before an evicted one is fetched again, ms (default 10 min). */
  retryMs?: number;
  /** Longest an install may take, ms (default 15 min). */
  installTimeoutMs?: number;
  /** Cap on the fetched workspaces on disk, bytes, dependencies included (default 20 GiB). */
  maxBytes?: number;
  /** Workspaces running jobs use now: never evicted, and their last use is recorded. */
  inUse?: () => ReadonlySet<string>;
  /** The clock (default Date.now). */
  now?: () => number;
}

export interface WorkspaceAcquirer extends FetchingWorkspaces {
  /** Content ids being fetched or installed now (the advert's `fetching`). */
  fetching(): string[];
  /** Fetched workspaces installed in an earlier run, added to `held` and `served`. */
  restore(): Promise<string[]>;
  /** Starts watching the fleet. */
  start(): void;
  /** Stops watching and aborts a fetch or install under way (what arrived stays for the next start). */
  stop(): Promise<void>;
}

const READY = '.ready';

function describeCalibration(c: WorkspaceCalibration | undefined): string {
  if (!c) return 'not calibrated';
  if (c.taskId === null) return 'no task mined to calibrate with';
  return `calibrated (the reference of ${c.taskId}, one of ${c.mined} tasks mined, scored 1.0) in ${c.ms} ms`;
}

/**
 * `--fetch-workspaces`: every `intervalMs`, fetches one workspace the fleet's other nodes advertise
 * and this node lacks (node/workspace/fetch.ts), installs and builds it (install.ts), and only then
 * adds it to what the node holds, serves and advertises. One at a time; a failure is retried with a
 * backoff (retryDue). A workspace ready in an earlier run is restored without fetching. Fetched
 * workspaces stay under `maxBytes` on disk: the least recently used one no running job uses is
 * evicted first, and not fetched again for `retryMs` (fetchDue).
 */
export function createWorkspaceAcquirer(options: WorkspaceAcquirerOptions): WorkspaceAcquirer {
  const { dir, held, served } = options;
  const now = options.now ?? Date.now;
  const failed = new Map<string, FailedAttempt>();
  const evictedAt = new Map<string, number>();
  const current = new Set<string>();
  /** Jobs waiting for a workspace being fetched (whenReady): settled when it is ready or fails. */
  const waiters = new Map<string, Set<{ resolve: (root: string) => void; reject: (err: Error) => void }>>();
  const settle = (id: string, outcome: { root: string } | { error: Error }) => {
    for (const w of waiters.get(id) ?? []) {
      if ('root' in outcome) w.resolve(outcome.root);
      else w.reject(outcome.error);
    }
    waiters.delete(id);
  };
  const stopping = new AbortController();
  let loop: Promise<void> | null = null;

  const adopt = (id: string, root: string, manifest: Manifest) => {
    held.set(id, root);
    served.set(id, servedFromManifest(root, manifest));
    fetchedIds.add(id);
  };
  const fetchedIds = new Set<string>();
  const rootOf = (id: string) => join(dir, workspaceDirName(id));

  /** Records the use of the workspaces running jobs use (the ready marker's mtime survives restarts). */
  const markUsed = async () => {
    const t = new Date(now());
    for (const id of options.inUse?.() ?? []) {
      if (fetchedIds.has(id)) await utimes(`${rootOf(id)}${READY}`, t, t).catch(() => {});
    }
  };

  /** Evicts least recently used fetched workspaces, never one in use or in `keep`, until the rest fit. */
  const enforceCap = async (keep: ReadonlySet<string>) => {
    const stored: StoredWorkspace[] = [];
    for (const id of fetchedIds)
      stored.push({
        id,
        bytes: await diskBytes(rootOf(id)),
        lastUsed: await touchedAt(`${rootOf(id)}${READY}`),
      });
    const inUse = options.inUse?.() ?? new Set<string>();
    const { evict, fits } = chooseEvictions(stored, {
      maxBytes: options.maxBytes ?? 20 * 1024 ** 3,
      incoming: 0,
      keep: new Set([...keep, ...inUse]),
    });
    for (const id of evict) {
      held.delete(id);
      served.delete(id);
      fetchedIds.delete(id);
      evictedAt.set(id, now());
      options.onChange();
      await removeWorkspaceFiles(rootOf(id), manifestPath(dir, id), `${rootOf(id)}${READY}`);
      log.info('evicted workspace %s (least recently used) to stay under the size cap', id);
    }
    if (!fits) log.warn('the fetched workspaces in use exceed the size cap of %s bytes', options.maxBytes);
  };

  const acquire = async (id: string, holders: string[]) => {
    const started = now();
    log.info('fetching workspace %s from %d holders (%s)', id, holders.length, holders.join(', '));
    current.add(id);
    options.onChange();
    try {
      const got = await fetchWorkspace({
        host: options.host,
        id,
        holders: () => holdersOf(options.nodes(), id),
        dir,
        signal: stopping.signal,
        ...(options.onOffence ? { onOffence: options.onOffence } : {}),
      });
      const fetchedMs = now() - started;
      const installed = await installWorkspace({
        root: got.root,
        files: got.manifest.files.filter((f) => !f.withheld).map((f) => f.path),
        signal: stopping.signal,
        ...(options.installTimeoutMs ? { timeoutMs: options.installTimeoutMs } : {}),
      });
      const calibration = await options.calibrate?.(got.root, stopping.signal);
      await writeFile(
        `${got.root}${READY}`,
        JSON.stringify({ fetchedMs, installMs: installed.ms, calibration: calibration ?? null }),
      );
      failed.delete(id);
      evictedAt.delete(id);
      adopt(id, got.root, got.manifest);
      settle(id, { root: got.root });
      await enforceCap(new Set([id]));
      log.info(
        'workspace %s ready in %s: fetched %d chunks (%d reused) in %d ms, installed (%s) in %d ms, %s',
        id,
        got.root,
        got.fetched,
        got.reused,
        fetchedMs,
        installed.commands.join(', ') || 'nothing to install',
        installed.ms,
        describeCalibration(calibration),
      );
    } catch (err) {
      settle(id, { error: err as Error });
      if (stopping.signal.aborted) return;
      const attempts = (failed.get(id)?.attempts ?? 0) + 1;
      failed.set(id, {
        at: now(),
        attempts,
        holders: [...new Set([...holders, ...holdersOf(options.nodes(), id)])],
      });
      log.warn(
        'workspace %s could not be fetched and installed (attempt %d; tried again later, or once another node holds it): %s',
        id,
        attempts,
        (err as Error).message,
      );
    } finally {
      current.delete(id);
      options.onChange();
    }
  };

  const backoff = { firstMs: options.retryFirstMs ?? 30_000, maxMs: options.retryMs ?? 10 * 60_000 };
  const skip = (id: string, holders: readonly string[]) =>
    !fetchDue(
      { busy: held.has(id) || current.has(id), failed: failed.get(id), evictedAt: evictedAt.get(id) },
      holders,
      now(),
      backoff,
    );

  return {
    fetching: () => [...current],
    has: (id) => current.has(id),
    whenReady(id, signal) {
      const root = held.get(id);
      if (root) return Promise.resolve(root);
      if (!current.has(id)) return Promise.reject(new Error(`workspace ${id} is not being fetched`));
      return new Promise<string>((resolve, reject) => {
        const onAbort = () => {
          waiters.get(id)?.delete(waiter);
          reject(signal.reason ?? new Error('aborted'));
        };
        const waiter = {
          resolve: (r: string) => {
            signal.removeEventListener('abort', onAbort);
            resolve(r);
          },
          reject: (e: Error) => {
            signal.removeEventListener('abort', onAbort);
            reject(e);
          },
        };
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        waiters.set(id, (waiters.get(id) ?? new Set()).add(waiter));
      });
    },
    async restore() {
      const restored: string[] = [];
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        if (!name.endsWith(READY)) continue;
        const id = `sha256:${basename(name, READY)}`;
        const root = join(dir, workspaceDirName(id));
        const manifest = await fetchedManifest(dir, id).catch(() => null);
        if (!manifest || !(await stat(root).catch(() => null))?.isDirectory()) continue;
        adopt(id, root, manifest);
        restored.push(id);
      }
      return restored;
    },
    start() {
      const interval = options.intervalMs ?? 5000;
      loop ??= (async () => {
        while (!stopping.signal.aborted) {
          await markUsed();
          const next = wantedWorkspaces(options.nodes(), skip)[0];
          if (next) {
            await enforceCap(new Set());
            await acquire(next.id, next.holders);
          } else if (!(await pause(interval, stopping.signal))) return;
        }
      })();
    },
    async stop() {
      stopping.abort(new Error('the node is stopping'));
      await loop;
    },
  };
}

/**
 * The content id of a fetched workspace root (`<workspaces dir>/<hex>`, with its verified manifest
 * beside it), or null for any other directory. A fetched tree lacks its withheld files and is not a
 * git checkout, so its id is the manifest's, not one recomputed from the tree.
 */
export async function fetchedWorkspaceId(root: string): Promise<string | null> {
  const name = basename(root);
  if (!/^[0-9a-f]{64}$/.test(name)) return null;
  const id = `sha256:${name}`;
  const text = await readFile(`${root}${READY}`, 'utf8').catch(() => null);
  if (text === null) return null;
  return (await fetchedManifest(dirname(root), id).catch(() => null)) ? id : null;
}
