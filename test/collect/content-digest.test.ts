// A dataset's content digest (in a collector's status every second while it collects, and in every
// export's manifest) reads no body: each body's hash is kept beside it. The digest's value is the one
// computed from the bodies themselves, also for a dataset written before the hashes were kept.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DATASET_DB, openDatasetStore } from '../../node/collector/store.ts';
import { sha256Hex } from '../../protocol/canonical.ts';
import { seededSigner } from '../helpers/digests.ts';
import { buildDataset } from '../helpers/storage.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-content-digest-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The digest as defined: every row, its body hashed from the stored body itself. */
function fromBodies(path: string): string {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const rows = db.prepare('SELECT * FROM samples ORDER BY origin, seq').all() as Record<string, unknown>[];
    const lines = rows.map((r) =>
      [
        r.origin,
        r.seq,
        r.sample_id,
        r.content_hash,
        r.reward,
        r.body_state,
        r.body_state === 'ok' ? sha256Hex(String(r.body_meta ?? '')) : '-',
        r.audit,
        r.quarantined,
      ].join(' '),
    );
    return `sha256:${sha256Hex(lines.join('\n'))}`;
  } finally {
    db.close();
  }
}

describe('dataset content digest', () => {
  it('equals the digest computed from the bodies, with pending and rejected rows too', async () => {
    const signer = await seededSigner(3);
    buildDataset(dir, signer, 40);
    const store = openDatasetStore(dir);
    try {
      const some = store.samples().slice(0, 2);
      store.rejectBody(some[0]!.digest);
      expect(store.contentDigest()).toBe(fromBodies(join(dir, DATASET_DB)));
    } finally {
      store.close();
    }
  });

  it('is the same for a dataset written before the body hashes were kept (they are added when it opens)', async () => {
    const signer = await seededSigner(4);
    buildDataset(dir, signer, 24);
    const path = join(dir, DATASET_DB);
    const expected = fromBodies(path);
    // The older layout: no meta_hash column.
    const db = new DatabaseSync(path);
    db.exec('ALTER TABLE samples DROP COLUMN meta_hash');
    db.close();
    const store = openDatasetStore(dir);
    try {
      expect(store.contentDigest()).toBe(expected);
      const db2 = new DatabaseSync(path, { readOnly: true });
      const missing = db2
        .prepare("SELECT COUNT(*) AS n FROM samples WHERE body_state = 'ok' AND meta_hash IS NULL")
        .get() as { n: number };
      db2.close();
      expect(Number(missing.n)).toBe(0);
    } finally {
      store.close();
    }
  });
});
