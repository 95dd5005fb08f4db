import { DatabaseSync } from 'node:sqlite';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  DIGEST_ROW_COLUMNS,
  type DigestRow,
  digestOfRow,
  digestValues,
  rowClaims,
} from '../../node/digests/row.ts';
import type { DigestSigner } from '../../node/digests/signature.ts';
import { claimFor, type SignedDigest } from '../../protocol/digest.ts';
import { testSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';

// The one place the sqlite stores (the worker's log, the collector's index) turn a signed digest into
// columns and back: a round trip through a real table must give back the very digest, for v1 and v2.
describe('digest rows', () => {
  let signer: DigestSigner;
  let v1: SignedDigest;
  let v2: SignedDigest;
  beforeAll(async () => {
    signer = await testSigner();
    v1 = signer.sign(claimFor(sampleBody('t1', 'qwen', 0), signer.origin, 1));
    v2 = signer.sign(
      claimFor(
        sampleBody('t2', 'qwen', 2, { reward: 0.25, split: 'eval' }),
        signer.origin,
        2,
        `sha256:${'cd'.repeat(32)}`,
      ),
    );
  });

  function table(): DatabaseSync {
    const db = new DatabaseSync(':memory:');
    db.exec(`CREATE TABLE samples (seq INTEGER PRIMARY KEY, sample_id TEXT NOT NULL, task_id TEXT NOT NULL,
      model TEXT NOT NULL, split TEXT NOT NULL, reward REAL NOT NULL, content_hash TEXT NOT NULL,
      eval_fingerprint TEXT NOT NULL, sig TEXT NOT NULL, task_hash TEXT) STRICT`);
    return db;
  }

  it('a digest written with digestValues reads back the same through digestOfRow (v1 and v2)', () => {
    const db = table();
    const insert = db.prepare(
      `INSERT INTO samples (${DIGEST_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    for (const d of [v1, v2]) insert.run(...digestValues(d));
    const rows = db
      .prepare(`SELECT ${DIGEST_ROW_COLUMNS} FROM samples ORDER BY seq`)
      .all() as unknown as DigestRow[];
    expect(rows.map((r) => digestOfRow(r, signer.origin))).toEqual([v1, v2]);
    expect('taskHash' in digestOfRow(rows[0]!, signer.origin)).toBe(false);
    for (const r of rows) expect(rowClaims(r, digestOfRow(r, signer.origin))).toBe(true);
  });

  const row = (d: SignedDigest): DigestRow => {
    const [seq, sample_id, task_id, model, split, reward, content_hash, eval_fingerprint, sig, task_hash] =
      digestValues(d);
    return { seq, sample_id, task_id, model, split, reward, content_hash, eval_fingerprint, sig, task_hash };
  };

  it.each([
    ['sampleId', { sampleId: `sha256:${'00'.repeat(32)}` }],
    ['taskId', { taskId: 'other' }],
    ['model', { model: 'llama' }],
    ['split', { split: 'train' as const }],
    ['reward', { reward: 1 }],
    ['contentHash', { contentHash: `sha256:${'11'.repeat(32)}` }],
    ['evalFingerprint', { evalFingerprint: `sha256:${'22'.repeat(32)}` }],
    ['taskHash', { taskHash: `sha256:${'33'.repeat(32)}` }],
  ])('a claim differing in %s is not the row', (_field, change) => {
    expect(rowClaims(row(v2), v2)).toBe(true);
    expect(rowClaims(row(v2), { ...v2, ...change })).toBe(false);
  });

  it('a v1 row is not a v2 claim, nor a v2 row a v1 claim', () => {
    const { taskHash: _, ...asV1 } = v2;
    expect(rowClaims(row(v2), { ...asV1, v: 1 })).toBe(false);
    expect(rowClaims(row(v1), { ...v1, v: 2, taskHash: `sha256:${'cd'.repeat(32)}` })).toBe(false);
  });
});
