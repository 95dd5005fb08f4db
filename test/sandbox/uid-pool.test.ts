import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { createUidPool } from '../../sandbox/uid-pool.ts';

let lockDir: string;
beforeEach(async () => {
  lockDir = await mkdtemp(join(tmpdir(), 'vtnode-uid-test-'));
});
afterEach(async () => {
  await rm(lockDir, { recursive: true, force: true });
});

it('never hands one uid to two pools (two scorer processes) on the same host', async () => {
  const a = createUidPool({ base: 70000, size: 3, lockDir });
  const b = createUidPool({ base: 70000, size: 3, lockDir });
  const got = [await a.acquire(), await b.acquire(), await a.acquire()];
  expect(new Set(got).size).toBe(3);
  await expect(b.acquire()).rejects.toThrow(/exhausted/);
  await a.release(got[0]!);
  expect(await b.acquire()).toBe(got[0]);
});

it('takes over the lock of a dead holder, and skips a uid something else runs as', async () => {
  await writeFile(join(lockDir, '70000'), '999999999');
  const pool = createUidPool({ base: 70000, size: 3, lockDir, inUse: async (uid) => uid === 70001 });
  expect(await pool.acquire()).toBe(70000);
  expect(await pool.acquire()).toBe(70002);
});

it('keeps the lock of a live holder', async () => {
  await writeFile(join(lockDir, '70000'), String(process.ppid));
  const pool = createUidPool({ base: 70000, size: 2, lockDir });
  expect(await pool.acquire()).toBe(70001);
});

it('can start the search anywhere in the range and still hands out every uid once', async () => {
  const pool = createUidPool({ base: 70000, size: 4, lockDir, start: 'random' });
  const got = await Promise.all([pool.acquire(), pool.acquire(), pool.acquire(), pool.acquire()]);
  expect([...got].sort()).toEqual([70000, 70001, 70002, 70003]);
  await expect(pool.acquire()).rejects.toThrow(/exhausted/);
});
