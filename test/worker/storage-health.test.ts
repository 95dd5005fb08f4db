// The worker's storage health: a full disk blocks it until space frees (disk-guard.test.ts), a
// sample log that fails for another reason (corrupt, I/O error) blocks it until it restarts.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DataDir } from '../../node/data-dir.ts';
import { logger } from '../../node/logger.ts';
import { workerStorage } from '../../node/worker/role.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-health-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sqliteError = (errcode: number, errstr: string) =>
  Object.assign(new Error(errstr), { code: 'ERR_SQLITE_ERROR', errcode, errstr });

describe('worker storage health', () => {
  it('a corrupt or failing sample log blocks the worker for good, naming the file; other errors do not', () => {
    let changes = 0;
    const health = workerStorage(
      {
        dataDir: new DataDir(dir),
        onChange: () => changes++,
        diskLimits: { minFreeBytes: 0, resumeFreeBytes: 1 },
      },
      logger('vtnode:test:health'),
    );
    try {
      expect(health.blocked()).toBeNull();
      expect(health.failed(new Error('UNIQUE constraint failed'), '/d/samples.db')).toBe(false);
      expect(health.failed(sqliteError(19, 'constraint'), '/d/samples.db')).toBe(false);
      expect(health.blocked()).toBeNull();
      expect(health.failed(sqliteError(11, 'database disk image is malformed'), '/d/samples.db')).toBe(true);
      expect(health.blocked()).toBe(
        '/d/samples.db failed (database disk image is malformed); stop the node and check that file',
      );
      expect(changes).toBe(1);
      // Another failure changes nothing more: the first cause stays.
      expect(health.failed(sqliteError(10 | (3 << 8), 'disk I/O error'), '/d/samples.db')).toBe(true);
      expect(changes).toBe(1);
      expect(health.blocked()).toMatch(/malformed/);
    } finally {
      health.stop();
    }
  });

  it('a full disk blocks it through the disk guard, naming the file that failed', () => {
    let changes = 0;
    const health = workerStorage(
      {
        dataDir: new DataDir(dir),
        onChange: () => changes++,
        diskLimits: { minFreeBytes: 0, resumeFreeBytes: 1 },
      },
      logger('vtnode:test:health'),
    );
    try {
      expect(health.failed(sqliteError(13, 'database or disk is full'), '/d/samples.db')).toBe(true);
      expect(health.blocked()).toBe(
        "the data dir's disk is full (writing /d/samples.db failed: database or disk is full)",
      );
      expect(changes).toBe(1);
    } finally {
      health.stop();
    }
  });
});
