// The stores hold private code (candidates, the dataset) and a node's work: owner only, whatever the
// umask, and an existing store from an older version is narrowed when it is opened (issue 12, build 7).
import { chmodSync, closeSync, openSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatasetStore } from '../../node/collector/store.ts';
import { openDatabase } from '../../node/sqlite.ts';
import { openCampaignStore } from '../../node/submitter/campaign-store.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { seededSigner } from '../helpers/digests.ts';
import { buildCampaignStore, buildDataset, buildSampleLog } from '../helpers/storage.ts';

let dir: string;
let umask: number;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-modes-'));
  // The usual umask: files 0644, folders 0755 unless the program says otherwise.
  umask = process.umask(0o022);
});
afterEach(async () => {
  process.umask(umask);
  await rm(dir, { recursive: true, force: true });
});

const mode = (path: string) => statSync(path).mode & 0o777;

/** Every file and folder under `root` (root included) with its permission bits. */
function modes(root: string): Record<string, string> {
  const out: Record<string, string> = { '.': mode(root).toString(8) };
  for (const name of readdirSync(root, { recursive: true }) as string[])
    out[name] = mode(join(root, name)).toString(8);
  return out;
}

describe('file modes of the stores', () => {
  it('a sample log, its -wal/-shm and its sequence mark are 0600', async () => {
    const signer = await seededSigner(1);
    buildSampleLog(join(dir, 'samples.db'), signer, 3);
    const log = openSampleLog({ path: join(dir, 'samples.db'), origin: signer.origin, signer });
    try {
      const files = modes(dir);
      expect(Object.keys(files)).toEqual(expect.arrayContaining(['samples.db', 'samples.db-wal']));
      for (const [name, m] of Object.entries(files))
        if (name !== '.') expect({ name, m }).toEqual({ name, m: '600' });
    } finally {
      log.close();
    }
  });

  it('a campaign store is 0600', () => {
    buildCampaignStore(join(dir, 'campaigns.db'));
    const store = openCampaignStore({ path: join(dir, 'campaigns.db') });
    try {
      expect(mode(join(dir, 'campaigns.db')).toString(8)).toBe('600');
      expect(mode(join(dir, 'campaigns.db-wal')).toString(8)).toBe('600');
    } finally {
      store.close();
    }
  });

  it('a dataset dir is 0700 and every file in it 0600', async () => {
    const ds = join(dir, 'dataset');
    buildDataset(ds, await seededSigner(2), 10);
    const files = modes(ds);
    expect(Object.keys(files).length).toBeGreaterThan(10);
    for (const [name, m] of Object.entries(files)) {
      const folder = statSync(join(ds, name)).isDirectory();
      expect({ name, m }).toEqual({ name, m: folder ? '700' : '600' });
    }
  });

  it('narrows a database and a dataset dir created 0644/0755 by an older version when opened', async () => {
    const path = join(dir, 'old.db');
    closeSync(openSync(path, 'w', 0o644));
    openDatabase(path).close();
    expect(mode(path).toString(8)).toBe('600');
    const ds = join(dir, 'old-ds');
    buildDataset(ds, await seededSigner(3), 2);
    chmodSync(ds, 0o755);
    chmodSync(join(ds, 'dataset.db'), 0o644);
    openDatasetStore(ds).close();
    expect([mode(ds).toString(8), mode(join(ds, 'dataset.db')).toString(8)]).toEqual(['700', '600']);
  });
});
