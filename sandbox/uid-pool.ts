import { mkdirSync } from 'node:fs';
import { open, readFile, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pidAlive } from './pid.ts';

/** First uid of the pool's range when running as root (one uid per concurrent run on the host). */
export const DEFAULT_UID_BASE = 61000;

/**
 * Hands out unprivileged uids to runs, unique across every scorer process on the host: runs are told
 * apart by uid (the survivor check kills every process of a run's uid), so two scorers must never share
 * one. A uid is held by a lock file naming the holder's pid; a lock whose holder is dead is taken over.
 */
export interface UidPool {
  /** Takes a free uid; throws when all are in use. */
  acquire(): Promise<number>;
  /** Returns a uid to the pool. */
  release(uid: number): Promise<void>;
}

export interface UidPoolOptions {
  /** First uid of the range. */
  base: number;
  /** Number of uids in the range (the most concurrent runs on the host). */
  size: number;
  /** Directory of the lock files (default $TMPDIR/vtnode-uids). */
  lockDir?: string;
  /** Where the search starts: the lowest uid, or a random one (fewer collisions with anything that uses
   * the range without the lock files, e.g. an older scorer). */
  start?: 'lowest' | 'random';
  /** True when a process of this uid is alive (a uid in use by anything else is skipped). */
  inUse?: (uid: number) => Promise<boolean>;
}

export function createUidPool(options: UidPoolOptions): UidPool {
  const lockDir = options.lockDir ?? join(tmpdir(), 'vtnode-uids');
  mkdirSync(lockDir, { recursive: true, mode: 0o700 });
  const mine = new Set<number>();
  const lockOf = (uid: number) => join(lockDir, String(uid));

  async function tryLock(uid: number): Promise<boolean> {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fh = await open(lockOf(uid), 'wx', 0o600);
        await fh.writeFile(String(process.pid));
        await fh.close();
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const holder = Number((await readFile(lockOf(uid), 'utf8').catch(() => '')).trim());
        // A lock being written has no pid yet; a live holder keeps it.
        if (!Number.isInteger(holder) || holder <= 0 || pidAlive(holder)) return false;
        await unlink(lockOf(uid)).catch(() => {});
      }
    }
    return false;
  }

  return {
    async acquire() {
      const offset = options.start === 'random' ? Math.floor(Math.random() * options.size) : 0;
      for (let i = 0; i < options.size; i++) {
        const uid = options.base + ((offset + i) % options.size);
        if (mine.has(uid)) continue;
        mine.add(uid);
        if (await tryLock(uid)) {
          if (!(await options.inUse?.(uid))) return uid;
          await unlink(lockOf(uid)).catch(() => {});
        }
        mine.delete(uid);
      }
      throw new Error(`uid pool exhausted: ${options.size} runs already in progress on this host`);
    },
    async release(uid) {
      if (!mine.delete(uid)) return;
      await unlink(lockOf(uid)).catch(() => {});
    },
  };
}
