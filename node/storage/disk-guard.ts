import { open, rm, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger.ts';
import { classifyStorageError, errorText } from './errors.ts';

/** Whether a data dir's disk can take writes. */
export type DiskState =
  | { full: false }
  | {
      full: true;
      /** When the guard found it full, ms since epoch. */
      since: number;
      /** Why: the failed write (file and error) or the free space left. */
      reason: string;
    };

/** Something that happened to the disk: a write failed, or a periodic look at the free space. */
export type DiskEvent =
  | {
      type: 'write-failed';
      /** The file whose write failed. */
      path: string;
      /** The error's text. */
      message: string;
      now: number;
    }
  | {
      type: 'probe';
      /** Bytes an unprivileged process may still write on the dir's file system. */
      freeBytes: number;
      /** Whether a probe file could be written and flushed; null when not tried. */
      writable: boolean | null;
      now: number;
    };

/** Free-space thresholds, bytes. */
export interface DiskLimits {
  /** Below this, the disk counts as full before any write fails. */
  minFreeBytes: number;
  /** A full disk counts as usable again once this much is free and a probe write succeeds (> minFreeBytes). */
  resumeFreeBytes: number;
}

export const DEFAULT_DISK_LIMITS: DiskLimits = { minFreeBytes: 32 * 2 ** 20, resumeFreeBytes: 64 * 2 ** 20 };

const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;

/**
 * The disk's next state. A write that failed for want of space, or free space below the minimum,
 * makes it full; it is usable again only with the resume margin free and a probe write that
 * succeeded (the gap between the two thresholds keeps a nearly full disk from flapping).
 */
export function nextDiskState(state: DiskState, event: DiskEvent, limits: DiskLimits): DiskState {
  if (event.type === 'write-failed') {
    if (state.full) return state;
    return { full: true, since: event.now, reason: `writing ${event.path} failed: ${event.message}` };
  }
  if (!state.full) {
    if (event.freeBytes >= limits.minFreeBytes) return state;
    return {
      full: true,
      since: event.now,
      reason: `${mib(event.freeBytes)} free, below the ${mib(limits.minFreeBytes)} a node keeps in reserve`,
    };
  }
  if (event.freeBytes >= limits.resumeFreeBytes && event.writable === true) return { full: false };
  return state;
}

/** Whether a full disk is worth a probe write: enough is free to resume if the write succeeds. */
export function wantsProbeWrite(state: DiskState, freeBytes: number, limits: DiskLimits): boolean {
  return state.full && freeBytes >= limits.resumeFreeBytes;
}

export interface DiskGuardOptions {
  /** The folder whose file system is watched (a node's data dir, a dataset dir). */
  dir: string;
  /** Free-space thresholds (default DEFAULT_DISK_LIMITS). */
  limits?: DiskLimits;
  /** How often the free space is looked at, ms (default 2000). */
  intervalMs?: number;
  /** Called on every change of state (after the guard has logged it). */
  onChange?: (state: DiskState) => void;
  /** The owner's logger: full and resumed are logged as warnings. */
  log: Logger;
  /** What stops while the disk is full, for the log ("this node takes no jobs"). */
  consequence: string;
}

export interface DiskGuard {
  state(): DiskState;
  /**
   * Reports a failed write: true when it failed for want of space (the guard is then full, and
   * the caller must treat the write as not done), false for any other error.
   */
  failed(err: unknown, path: string): boolean;
  /** Looks at the free space now (the timer does it every intervalMs). */
  check(): Promise<DiskState>;
  stop(): void;
}

const PROBE_FILE = '.vtnode-space-probe';
const PROBE_BYTES = 64 * 1024;

/** Writes and flushes a small file in `dir`, then removes it: whether the disk really takes writes. */
async function probeWrite(dir: string): Promise<boolean> {
  const path = join(dir, PROBE_FILE);
  try {
    const fh = await open(path, 'w');
    try {
      await fh.write(Buffer.alloc(PROBE_BYTES));
      await fh.sync();
    } finally {
      await fh.close();
    }
    return true;
  } catch {
    return false;
  } finally {
    await rm(path, { force: true }).catch(() => {});
  }
}

/**
 * Watches the disk of a data dir: a write that fails for want of space (ENOSPC, SQLITE_FULL), or free
 * space below the reserve, turns it full; the owner stops taking work while it is; once space frees
 * (with a margin, and a probe write succeeds) it turns usable again and the owner resumes.
 */
export function createDiskGuard(options: DiskGuardOptions): DiskGuard {
  const limits = options.limits ?? DEFAULT_DISK_LIMITS;
  const { log, dir } = options;
  let state: DiskState = { full: false };
  let stopped = false;

  const apply = (event: DiskEvent) => {
    const next = nextDiskState(state, event, limits);
    if (next === state || next.full === state.full) {
      state = next;
      return;
    }
    state = next;
    if (next.full)
      log.warn(`the disk of ${dir} is full: ${next.reason}. ${options.consequence} until space frees.`);
    else log.warn(`the disk of ${dir} has space again: resuming`);
    options.onChange?.(state);
  };

  let checking: Promise<DiskState> | null = null;
  const check = (): Promise<DiskState> => {
    checking ??= (async () => {
      try {
        const fs = await statfs(dir);
        const freeBytes = Number(fs.bavail) * Number(fs.bsize);
        const writable = wantsProbeWrite(state, freeBytes, limits) ? await probeWrite(dir) : null;
        if (!stopped) apply({ type: 'probe', freeBytes, writable, now: Date.now() });
      } catch (err) {
        log(`looking at the free space of ${dir} failed: ${errorText(err)}`);
      }
      return state;
    })().finally(() => {
      checking = null;
    });
    return checking;
  };

  const timer = setInterval(() => void check(), options.intervalMs ?? 2000);
  timer.unref();
  void check();

  return {
    state: () => state,
    failed(err, path) {
      if (classifyStorageError(err) !== 'full') return false;
      apply({ type: 'write-failed', path, message: errorText(err), now: Date.now() });
      return true;
    },
    check,
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
