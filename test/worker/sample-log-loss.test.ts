// A sample log that lost committed rows (a truncated or deleted WAL, an older copy restored) never
// hands out a sequence number it already published (issue 11, defect 5): the lost seqs become a
// recorded range and new samples continue after the mark. Real WAL files of a writer killed with -9.
import { spawn } from 'node:child_process';
import { copyFile, mkdtemp, rm, stat, truncate, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DigestSigner } from '../../node/digests/signature.ts';
import { openSampleLog, type SampleLog } from '../../node/worker/sample-log.ts';
import { REPO } from '../helpers/cli.ts';
import { seededSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';

let dir: string;
let path: string;
/** The writer child signs with the key of seed 1: the same origin here. */
let signer: DigestSigner;
let ORIGIN = '';
beforeAll(async () => {
  signer = await seededSigner(1);
  ORIGIN = signer.origin;
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-loss-'));
  path = join(dir, 'samples.db');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs the appending child until it acknowledged `atLeast` samples, kills it with -9; returns seq → sample id acked. */
async function writeThenKill(atLeast: number): Promise<Map<number, string>> {
  const child = spawn(process.execPath, [join(REPO, 'test/helpers/sample-log-writer.ts'), path, ORIGIN], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Every ack the child wrote before it died is read ('close': its stdout ended), not only those read by its exit.
  const closed = new Promise((r) => child.once('close', r));
  const acked = new Map<number, string>();
  let buf = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${acked.size} acks in 60 s`)), 60_000);
    child.stdout!.on('data', (d) => {
      buf += d;
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines) {
        const [, seq, id] = l.split(' ');
        acked.set(Number(seq), id!);
      }
      if (acked.size >= atLeast) {
        clearTimeout(timer);
        child.kill('SIGKILL');
        resolve();
      }
    });
    child.on('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  await closed;
  return acked;
}

/** Checks that nothing acked is rewritten or reused, and that new samples continue after every acked seq. */
function expectNoRewind(log: SampleLog, acked: Map<number, string>): void {
  const maxAcked = Math.max(...acked.keys());
  const kept = log.digestsSince(0, 500);
  const lost = log.lostSince(0, 64);
  // Every seq up to the high-water mark is either held or in a lost range, once.
  const covered = new Set<number>();
  for (const d of kept) covered.add(d.seq);
  for (const r of lost)
    for (let s = r.first; s <= r.last; s++) {
      expect(covered.has(s)).toBe(false);
      covered.add(s);
    }
  const top = log.counts().highWater;
  expect(top).toBeGreaterThanOrEqual(maxAcked);
  expect([...covered].sort((a, b) => a - b)).toEqual(Array.from({ length: top }, (_, i) => i + 1));
  // A row that survived keeps its seq.
  for (const d of kept) if (acked.has(d.seq)) expect(acked.get(d.seq)).toBe(d.sampleId);
  // New samples (and samples logged again after their row was lost) take seqs no one has seen.
  const fresh = log.append(sampleBody('after-loss', 'qwen', 0));
  expect(fresh.seq).toBe(top + 1);
  expect(fresh.seq).toBeGreaterThan(maxAcked);
  const lostId = [...acked].find(([seq]) => lost.some((r) => r.first <= seq && seq <= r.last));
  if (lostId) expect(log.get(lostId[1])).toBeUndefined();
}

describe('sample log: rows lost under it never rewind its sequence numbers', () => {
  it('the WAL deleted after a kill -9: every acked seq is recorded lost, the log continues after them', async () => {
    const acked = await writeThenKill(150);
    expect((await stat(`${path}-wal`)).size).toBeGreaterThan(0);
    await unlink(`${path}-wal`);
    await rm(`${path}-shm`, { force: true });
    const log = openSampleLog({ path, origin: ORIGIN, signer });
    expect(log.counts().samples).toBeLessThan(acked.size);
    expect(log.lostSince(0, 64).length).toBe(1);
    expectNoRewind(log, acked);
    log.close();
  }, 90_000);

  it('the WAL truncated to a third after a kill -9: the tail is lost, the survivors keep their seqs', async () => {
    // Few enough rows that no checkpoint has run: all of them are in the WAL.
    const acked = await writeThenKill(120);
    const wal = `${path}-wal`;
    await truncate(wal, Math.floor((await stat(wal)).size / 3));
    const log = openSampleLog({ path, origin: ORIGIN, signer });
    const held = log.counts().samples;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(Math.max(...acked.keys()));
    expect(log.lostSince(0, 64)).toEqual([{ first: held + 1, last: log.counts().highWater }]);
    expectNoRewind(log, acked);
    log.close();
  }, 90_000);

  it('the WAL cut to a few bytes (its header torn): same as deleted', async () => {
    const acked = await writeThenKill(100);
    await truncate(`${path}-wal`, 20);
    const log = openSampleLog({ path, origin: ORIGIN, signer });
    expectNoRewind(log, acked);
    log.close();
  }, 90_000);

  it('an older copy restored: the rows after it are lost, and a second loss adds a second range', async () => {
    let log = openSampleLog({ path, origin: ORIGIN, signer });
    const first = Array.from({ length: 10 }, (_, i) => log.append(sampleBody('t', 'qwen', i)));
    log.close();
    await copyFile(path, join(dir, 'backup.db'));
    log = openSampleLog({ path, origin: ORIGIN, signer });
    for (let i = 10; i < 20; i++) log.append(sampleBody('t', 'qwen', i));
    log.close();
    await copyFile(join(dir, 'backup.db'), path);
    log = openSampleLog({ path, origin: ORIGIN, signer });
    expect(log.counts()).toMatchObject({ samples: 10, highWater: 20 });
    expect(log.lostSince(0, 64)).toEqual([{ first: 11, last: 20 }]);
    expect(log.get(first[3]!.body.sampleId)?.seq).toBe(4);
    // A lost sample logged again takes a new seq.
    expect(log.append(sampleBody('t', 'qwen', 12)).seq).toBe(21);
    log.close();
    await copyFile(join(dir, 'backup.db'), path);
    log = openSampleLog({ path, origin: ORIGIN, signer });
    expect(log.lostSince(0, 64)).toEqual([{ first: 11, last: 21 }]);
    expect(log.lostSince(15, 64)).toEqual([{ first: 11, last: 21 }]);
    expect(log.lostSince(21, 64)).toEqual([]);
    expect(log.append(sampleBody('t', 'qwen', 30)).seq).toBe(22);
    log.close();
    // Ranges recorded in the log survive a clean reopen; a later loss adds its own.
    log = openSampleLog({ path, origin: ORIGIN, signer });
    for (let i = 31; i < 35; i++) log.append(sampleBody('t', 'qwen', i));
    log.close();
    await copyFile(path, join(dir, 'backup2.db'));
    log = openSampleLog({ path, origin: ORIGIN, signer });
    log.append(sampleBody('t', 'qwen', 40));
    log.close();
    await copyFile(join(dir, 'backup2.db'), path);
    log = openSampleLog({ path, origin: ORIGIN, signer });
    expect(log.lostSince(0, 64)).toEqual([
      { first: 11, last: 21 },
      { first: 27, last: 27 },
    ]);
    expect(log.counts().highWater).toBe(27);
    log.close();
  });

  it('samples.db deleted (moved aside) with its WAL: a new log starting after the published seqs', async () => {
    let log = openSampleLog({ path, origin: ORIGIN, signer });
    for (let i = 0; i < 5; i++) log.append(sampleBody('t', 'qwen', i));
    log.close();
    await unlink(path);
    log = openSampleLog({ path, origin: ORIGIN, signer });
    expect(log.counts()).toMatchObject({ samples: 0, highWater: 5 });
    expect(log.lostSince(0, 64)).toEqual([{ first: 1, last: 5 }]);
    expect(log.append(sampleBody('t', 'qwen', 0)).seq).toBe(6);
    log.close();
  });

  it('the mark file deleted, the log intact: the mark is rebuilt from the log, nothing is lost', async () => {
    let log = openSampleLog({ path, origin: ORIGIN, signer });
    for (let i = 0; i < 5; i++) log.append(sampleBody('t', 'qwen', i));
    log.close();
    await unlink(join(dir, 'samples.seq'));
    log = openSampleLog({ path, origin: ORIGIN, signer });
    expect(log.lostSince(0, 64)).toEqual([]);
    expect(log.append(sampleBody('t', 'qwen', 5)).seq).toBe(6);
    log.close();
    await copyFile(path, join(dir, 'old.db'));
    log = openSampleLog({ path, origin: ORIGIN, signer });
    log.append(sampleBody('t', 'qwen', 6));
    log.close();
    await copyFile(join(dir, 'old.db'), path);
    // The rebuilt mark protects from then on.
    log = openSampleLog({ path, origin: ORIGIN, signer });
    expect(log.lostSince(0, 64)).toEqual([{ first: 7, last: 7 }]);
    log.close();
  });
});
