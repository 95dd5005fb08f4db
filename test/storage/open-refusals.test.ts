// Every SQLite store the program opens refuses a damaged file at open, with an error that names the
// file, what it holds and what to do (issue 11, defect 5).
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DATASET_DB, openDatasetStore } from '../../node/collector/store.ts';
import { openDatabase } from '../../node/sqlite.ts';
import { classifyStorageError, StorageError } from '../../node/storage/errors.ts';
import { openCampaignStore } from '../../node/submitter/campaign-store.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { seededSigner } from '../helpers/digests.ts';
import { buildCampaignStore, buildDataset, buildSampleLog, DAMAGES } from '../helpers/storage.ts';

let dir: string;
/** Intact stores, built once and copied into each test's dir. */
let templates: string;
/** The origin of the template sample log. */
let origin = '';
beforeAll(async () => {
  templates = await mkdtemp(join(tmpdir(), 'vt-refuse-templates-'));
  const signer = await seededSigner(3);
  origin = signer.origin;
  buildSampleLog(join(templates, 'samples.db'), signer, 60);
  buildDataset(join(templates, 'ds'), signer, 200);
  buildCampaignStore(join(templates, 'campaigns.db'));
}, 60_000);
afterAll(async () => {
  await rm(templates, { recursive: true, force: true });
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-refuse-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sqliteError = (errcode: number, errstr: string) =>
  Object.assign(new Error(errstr), { code: 'ERR_SQLITE_ERROR', errcode, errstr });
const fsError = (code: string) => Object.assign(new Error(`${code}: something, write`), { code });

describe('classifyStorageError', () => {
  it('maps SQLite result codes (primary and extended) and errno codes to faults', () => {
    const cases: [unknown, ReturnType<typeof classifyStorageError>][] = [
      [sqliteError(11, 'database disk image is malformed'), 'corrupt'],
      [sqliteError(11 | (1 << 8), 'SQLITE_CORRUPT_VTAB'), 'corrupt'],
      [sqliteError(26, 'file is not a database'), 'not-a-database'],
      [sqliteError(13, 'database or disk is full'), 'full'],
      [sqliteError(10 | (3 << 8), 'disk I/O error'), 'io'],
      [sqliteError(8, 'attempt to write a readonly database'), 'read-only'],
      [sqliteError(14, 'unable to open database file'), 'read-only'],
      [sqliteError(3, 'access permission denied'), 'read-only'],
      [sqliteError(5, 'database is locked'), null],
      [sqliteError(19, 'UNIQUE constraint failed'), null],
      [fsError('ENOSPC'), 'full'],
      [fsError('EDQUOT'), 'full'],
      [fsError('EFBIG'), 'full'],
      [fsError('EROFS'), 'read-only'],
      [fsError('EACCES'), 'read-only'],
      [fsError('EIO'), 'io'],
      [fsError('ENOENT'), null],
      [new Error('plain'), null],
      ['a string', null],
      [null, null],
      [undefined, null],
      [new StorageError({ path: '/x', fault: 'full', what: 'x', advice: 'y' }), 'full'],
    ];
    for (const [err, fault] of cases) expect(classifyStorageError(err), String(err)).toBe(fault);
  });

  it('a StorageError names the file, what it holds, the problem, the cause and the advice', () => {
    const e = new StorageError({
      path: '/data/samples.db',
      fault: 'corrupt',
      what: "the worker's sample log",
      detail: 'database disk image is malformed',
      advice: 'Move it aside.',
    });
    expect(e.message).toBe(
      "/data/samples.db: the worker's sample log is corrupt (database disk image is malformed). Move it aside.",
    );
    expect(e.path).toBe('/data/samples.db');
    expect(e.fault).toBe('corrupt');
  });
});

const STORES = [
  {
    name: 'sample log (samples.db)',
    file: () => join(dir, 'samples.db'),
    build: () => cp(join(templates, 'samples.db'), join(dir, 'samples.db')),
    open: () => openSampleLog({ path: join(dir, 'samples.db'), origin }).close(),
    what: /the worker's sample log/,
    advice: /move it aside .*continues after the last sequence number it published/,
  },
  {
    name: 'dataset index (dataset.db)',
    file: () => join(dir, 'ds', DATASET_DB),
    build: () => cp(join(templates, 'ds'), join(dir, 'ds'), { recursive: true }),
    open: () => openDatasetStore(join(dir, 'ds')).close(),
    what: /the collector's dataset index/,
    advice: /fresh --out: catch-up fetches every digest and body again/,
  },
  {
    name: 'campaign store (campaigns.db)',
    file: () => join(dir, 'campaigns.db'),
    build: () => cp(join(templates, 'campaigns.db'), join(dir, 'campaigns.db')),
    open: () => openCampaignStore({ path: join(dir, 'campaigns.db') }).close(),
    what: /the submitter's campaign store/,
    advice: /Move it aside .*workers answer the samples they already scored from their logs/,
  },
];

describe('opening a damaged store', () => {
  for (const store of STORES)
    for (const damage of DAMAGES)
      it(`${store.name}, ${damage.name}: refused with the path and what to do`, async () => {
        await store.build();
        store.open(); // intact: opens
        await damage.apply(store.file());
        let thrown: unknown;
        try {
          store.open();
        } catch (err) {
          thrown = err;
        }
        expect(thrown, 'the damaged file was opened').toBeInstanceOf(StorageError);
        const e = thrown as StorageError;
        expect(e.path).toBe(store.file());
        expect(e.fault).toBe(damage.fault);
        expect(e.message.startsWith(`${store.file()}: `)).toBe(true);
        expect(e.message).toMatch(store.what);
        expect(e.message).toMatch(store.advice);
      });

  it('an empty file is a new database, not a damaged one', async () => {
    await writeFile(join(dir, 'samples.db'), '');
    const log = openSampleLog({ path: join(dir, 'samples.db'), origin: 'o' });
    expect(log.counts().samples).toBe(0);
    log.close();
  });

  it('a database in a folder that cannot be created is refused with the path', () => {
    expect(() => openDatabase(join(dir, 'no', 'such', 'folder', 'x.db'))).toThrow(StorageError);
    expect(() => openDatabase(join(dir, 'no', 'such', 'folder', 'x.db'))).toThrow(
      new RegExp(`^${join(dir, 'no', 'such', 'folder', 'x.db')}: `),
    );
  });
});
