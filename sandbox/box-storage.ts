import { execFile } from 'node:child_process';
import type { Stats } from 'node:fs';
import { lstat, opendir, readdir, readlink, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ExceededLimit } from './confinement.ts';
import type { RunMonitor } from './group-run.ts';
import type { Limits } from './limits.ts';
import { logger } from './log.ts';
import type { ProcInfo } from './procfs.ts';
import { readMounts } from './procfs.ts';

const log = logger('vtnode:sandbox:box-storage');
const execFileAsync = promisify(execFile);
const TOOLS_ENV = { PATH: '/usr/bin:/bin:/usr/sbin:/sbin' };

/** The mount source that marks a box's tmpfs (and lets releaseBoxStorage tell it from any other mount). */
export const BOX_MOUNT_SOURCE = 'vtnode-box';

/** Where a box's files live: a tmpfs of its own (a hard quota) or a plain folder (a sampled one). */
export type BoxStorageKind = 'tmpfs' | 'directory';

export interface BoxStorageOptions {
  /** `auto` (default): a tmpfs of its own when root on Linux, else a plain folder; `directory` forces it. */
  mode?: 'auto' | 'directory';
  /** Size cap of the tmpfs while the scorer fills the box, bytes (a run seals it at its own quota). */
  setupBytes?: number;
  /** Inode cap of the tmpfs while the scorer fills the box. */
  setupInodes?: number;
}

/** What a run may add to its box: Limits' diskBytes, inodes, and fileSizeBytes (the grace, see below). */
export type BoxQuota = Pick<Limits, 'diskBytes' | 'inodes' | 'fileSizeBytes'>;

/** Bytes and inodes (directory entries on a plain folder) in use. */
export interface StorageUsage {
  bytes: number;
  inodes: number;
}

/** Watches what one run adds to its box; `exceeded` reports `disk` or `inodes` past the quota. */
export interface StorageWatch extends RunMonitor {
  readonly kind: BoxStorageKind;
  /** Bytes and inodes the run has added so far (a fresh measurement). */
  added(): Promise<StorageUsage>;
}

let warnedMount = false;

/**
 * Makes `dir` (a fresh, empty folder) a box's storage before anything is copied in: as root on Linux
 * it becomes a tmpfs of its own (mode 0700, nosuid, nodev, with setup caps); otherwise, or when the
 * mount is refused, it stays a plain folder. Returns which.
 */
export async function prepareBoxStorage(
  dir: string,
  options: BoxStorageOptions = {},
): Promise<BoxStorageKind> {
  if ((options.mode ?? 'auto') === 'directory') return 'directory';
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'directory';
  const size = options.setupBytes ?? 2 * 1024 ** 3;
  const inodes = options.setupInodes ?? 1_000_000;
  try {
    await execFileAsync(
      'mount',
      ['-t', 'tmpfs', '-o', `size=${size},nr_inodes=${inodes},mode=0700,nosuid,nodev`, BOX_MOUNT_SOURCE, dir],
      { env: TOOLS_ENV },
    );
    return 'tmpfs';
  } catch (err) {
    if (!warnedMount)
      log.warn(`cannot mount a tmpfs box (${(err as Error).message.trim()}): boxes are plain folders`);
    warnedMount = true;
    return 'directory';
  }
}

/** True when `dir` is a box tmpfs (made by prepareBoxStorage) in this mount namespace. */
async function isBoxMount(dir: string): Promise<boolean> {
  if (process.platform !== 'linux') return false;
  const mounts = await readMounts().catch(() => []);
  return mounts.some((m) => m.mountPoint === dir && m.fsType === 'tmpfs' && m.source === BOX_MOUNT_SOURCE);
}

/**
 * Undoes prepareBoxStorage: unmounts the box's tmpfs (which frees its memory at once), lazily when
 * something still holds it (the memory is freed when the last holder goes). A plain folder is left
 * alone; removing the folder is the caller's job.
 */
export async function releaseBoxStorage(dir: string): Promise<void> {
  for (let i = 0; i < 4 && (await isBoxMount(dir)); i++) {
    try {
      await execFileAsync('umount', [dir], { env: TOOLS_ENV });
    } catch {
      await execFileAsync('umount', ['-l', dir], { env: TOOLS_ENV }).catch((err: Error) => {
        log.warn(`cannot unmount box ${dir}: ${err.message.trim()}`);
      });
    }
  }
}

/** Usage of a whole filesystem (a box's own tmpfs). */
async function fsUsage(dir: string): Promise<StorageUsage> {
  const s = await statfs(dir);
  return { bytes: (s.blocks - s.bfree) * s.bsize, inodes: s.files - s.ffree };
}

/**
 * Bytes and directory entries under `dir`, without following links; hard links count their bytes
 * once. Stops early once `stopAt` is passed (the quota is already exceeded; no need to walk a bomb).
 */
export async function treeUsage(dir: string, stopAt: StorageUsage): Promise<StorageUsage> {
  const seen = new Set<string>();
  const usage = { bytes: 0, inodes: 1 };
  const stack = [dir];
  while (stack.length > 0 && usage.bytes <= stopAt.bytes && usage.inodes <= stopAt.inodes) {
    const folder = stack.pop()!;
    const handle = await opendir(folder).catch(() => null);
    if (!handle) continue;
    for await (const entry of handle) {
      const path = join(folder, entry.name);
      const st: Stats | null = await lstat(path).catch(() => null);
      usage.inodes++;
      if (st && !seen.has(`${st.dev}:${st.ino}`)) {
        seen.add(`${st.dev}:${st.ino}`);
        usage.bytes += st.blocks * 512;
      }
      if (entry.isDirectory()) stack.push(path);
      if (usage.bytes > stopAt.bytes || usage.inodes > stopAt.inodes) break;
    }
  }
  return usage;
}

/**
 * Bytes of deleted files on device `dev` that the run's processes still hold open: they vanish from a
 * walk (open, unlink, keep writing) but still take space. Linux only (/proc/<pid>/fd).
 */
async function heldDeletedBytes(members: ProcInfo[] | null, dev: number): Promise<number> {
  if (!members || process.platform !== 'linux') return 0;
  const seen = new Set<number>();
  let bytes = 0;
  for (const p of members) {
    const fds = await readdir(`/proc/${p.pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const path = `/proc/${p.pid}/fd/${fd}`;
      const target = await readlink(path).catch(() => '');
      if (!target.endsWith(' (deleted)')) continue;
      const st = await stat(path).catch(() => null);
      if (!st || st.dev !== dev || seen.has(st.ino)) continue;
      seen.add(st.ino);
      bytes += st.blocks * 512;
    }
  }
  return bytes;
}

/** `disk` or `inodes` when `added` is past the quota. */
function verdict(added: StorageUsage, quota: BoxQuota): ExceededLimit | null {
  if (added.bytes > quota.diskBytes) return 'disk';
  if (added.inodes > quota.inodes) return 'inodes';
  return null;
}

/**
 * A box tmpfs sealed at the run's quota: remounted with room for what it holds now plus the quota,
 * plus a grace of one inode and, in bytes, of one largest file (RLIMIT_FSIZE) but at most the quota
 * again. The grace makes refusals visible: a write or fallocate is refused only when the space left
 * is smaller than its request, so a refused request up to the grace means the run is past its quota
 * and is reported and killed, not left running on ENOSPC errors it may ignore. (A single request larger
 * than the grace can be refused below the quota: contained, but not reported.)
 */
async function sealedTmpfs(dir: string, quota: BoxQuota): Promise<StorageWatch> {
  const base = await fsUsage(dir);
  const size = base.bytes + quota.diskBytes + Math.min(quota.fileSizeBytes, quota.diskBytes);
  const inodes = base.inodes + quota.inodes + 1;
  await execFileAsync('mount', ['-o', `remount,size=${size},nr_inodes=${inodes}`, dir], { env: TOOLS_ENV });
  const added = async () => {
    const now = await fsUsage(dir);
    return { bytes: now.bytes - base.bytes, inodes: now.inodes - base.inodes };
  };
  return { kind: 'tmpfs', added, exceeded: async () => verdict(await added(), quota) };
}

/**
 * A plain folder, walked at most every `max(250 ms, 4 × the last walk)` plus the deleted files the
 * run holds open. Bound: between two walks the run can write what its disk takes in that time (each
 * file still capped by RLIMIT_FSIZE) before it is seen and killed.
 */
async function sampledFolder(dir: string, quota: BoxQuota): Promise<StorageWatch> {
  const dev = (await stat(dir)).dev;
  const unbounded = { bytes: Number.POSITIVE_INFINITY, inodes: Number.POSITIVE_INFINITY };
  const base = await treeUsage(dir, unbounded);
  const stopAt = { bytes: base.bytes + quota.diskBytes, inodes: base.inodes + quota.inodes };
  const measure = async (members: ProcInfo[] | null): Promise<StorageUsage> => {
    const now = await treeUsage(dir, stopAt);
    const held = await heldDeletedBytes(members, dev);
    return { bytes: now.bytes + held - base.bytes, inodes: now.inodes - base.inodes };
  };
  let nextWalk = 0;
  let last: ExceededLimit | null = null;
  return {
    kind: 'directory',
    added: () => measure(null),
    async exceeded(members) {
      const started = performance.now();
      // The final check after the run (no members left) always walks.
      if (started < nextWalk && members?.length !== 0) return last;
      last = verdict(await measure(members), quota);
      nextWalk = performance.now() + Math.max(250, 4 * (performance.now() - started));
      return last;
    },
  };
}

/**
 * Watches what a run adds to the box `dir`: a box tmpfs is sealed at the quota (exact, hard); a plain
 * folder is walked periodically (sampled, see sampledFolder). Call once per run, before it starts.
 */
export async function watchBoxStorage(dir: string, quota: BoxQuota): Promise<StorageWatch> {
  return (await isBoxMount(dir)) ? await sealedTmpfs(dir, quota) : await sampledFolder(dir, quota);
}
