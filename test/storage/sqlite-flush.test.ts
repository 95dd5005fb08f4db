import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, withoutFlush } from '../../node/sqlite.ts';

// withoutFlush relaxes durability for one write (progress a restart resets anyway): every other
// write of the database must stay synchronous=FULL afterwards, even when the relaxed write throws.
const FULL = 2;
const NORMAL = 1;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-sqlite-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('withoutFlush', () => {
  const level = (db: ReturnType<typeof openDatabase>) =>
    (db.prepare('PRAGMA synchronous').get() as { synchronous: number }).synchronous;

  it('runs the write with synchronous NORMAL, then restores FULL', () => {
    const db = openDatabase(join(dir, 'a.db'));
    db.exec('CREATE TABLE t (x INTEGER)');
    expect(level(db)).toBe(FULL);
    const inside = withoutFlush(db, () => {
      db.prepare('INSERT INTO t (x) VALUES (1)').run();
      return level(db);
    });
    expect(inside).toBe(NORMAL);
    expect(level(db)).toBe(FULL);
    expect(db.prepare('SELECT COUNT(*) AS n FROM t').get()).toEqual({ n: 1 });
    db.close();
  });

  it('restores FULL when the write throws', () => {
    const db = openDatabase(join(dir, 'b.db'));
    expect(() =>
      withoutFlush(db, () => {
        db.prepare('INSERT INTO missing (x) VALUES (1)').run();
      }),
    ).toThrow(/no such table/);
    expect(level(db)).toBe(FULL);
    db.close();
  });
});
