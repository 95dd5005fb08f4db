// Corrupt databases under real `vtnode start`, `join` and `collect` processes (issue 11, defect 5):
// each is refused at once with the file's path and what to do, no stack trace, exit code 1. Before
// the fix a damaged page deep in samples.db let the node start and run forever (the hang), and a
// damaged header ended in a stack trace without the file's name.
import { cp, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATASET_DB } from '../../node/collector/store.ts';
import { DataDir } from '../../node/data-dir.ts';
import { type DigestSigner, digestSigner } from '../../node/digests/signature.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { eventually, Sandbox, vtnode } from '../helpers/cli.ts';
import { seededSigner } from '../helpers/digests.ts';
import { initFleet, startNode, status } from '../helpers/fleet.ts';
import { buildCampaignStore, buildDataset, buildSampleLog, DAMAGES } from '../helpers/storage.ts';

const box = new Sandbox();
/** An initialised data dir (identity, fleet, config), copied for each case. */
let template = '';
let token = '';
/** Intact databases, copied then damaged for each case. */
let dbs = '';
/** The template node's digest signer (its own key). */
let signer: DigestSigner;

beforeAll(async () => {
  ({ dataDir: template, token } = await initFleet(box, 'corrupt'));
  // The node's own log (its peer id as origin): damaged where SQLite does not look at open, the old
  // code started on it and ran.
  signer = digestSigner((await new DataDir(template).identity()).privateKey);
  dbs = await box.tempDir('vt-corrupt-dbs-');
  buildSampleLog(join(dbs, 'samples.db'), signer, 60);
  buildCampaignStore(join(dbs, 'campaigns.db'));
  buildDataset(join(dbs, 'ds'), await seededSigner(4), 200);
}, 60_000);
afterAll(async () => {
  await box.cleanup();
});

const damage = (name: string) => DAMAGES.find((d) => d.name.startsWith(name))!;

/** A copy of the initialised data dir holding `file` (from the intact set), damaged by `how`. */
async function dataDirWith(file: 'samples.db' | 'campaigns.db', how: string): Promise<string> {
  const dir = await box.tempDir('vt-corrupt-node-');
  await cp(template, dir, { recursive: true });
  await cp(join(dbs, file), join(dir, file));
  await damage(how).apply(join(dir, file));
  return dir;
}

/** Runs a vtnode command that must refuse: bounded (the regression is a process that never exits). */
async function refused(args: string[], path: string, what: RegExp): Promise<string> {
  const started = Date.now();
  const r = await vtnode(args, { timeoutMs: 45_000 });
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr).toContain(`vtnode: ${path}: `);
  expect(r.stderr).toMatch(what);
  // A message for the operator, not a stack trace.
  expect(r.stderr).not.toMatch(/^\s+at /m);
  return `${Date.now() - started} ms`;
}

const NO_SERVER = ['--model-server', 'http://127.0.0.1:9'];

/** The node's peer id once it answers (a start takes a while on a loaded machine). */
const answering = (dir: string) =>
  eventually(async () => (await status(dir)).self, 60_000, `${dir} to answer status`);

describe('vtnode start refuses a damaged database of its data dir', () => {
  for (const how of ['garbage over pages in the middle', 'random bytes', 'cut to 50 bytes'])
    it(`samples.db, ${how}`, async () => {
      const dir = await dataDirWith('samples.db', how);
      await refused(
        ['start', '--data-dir', dir, ...NO_SERVER],
        join(dir, 'samples.db'),
        /the worker's sample log (is corrupt|is not a SQLite database).*move it aside/s,
      );
    }, 60_000);

  it('campaigns.db, garbage over pages in the middle', async () => {
    const dir = await dataDirWith('campaigns.db', 'garbage over pages in the middle');
    await refused(
      ['start', '--data-dir', dir, ...NO_SERVER],
      join(dir, 'campaigns.db'),
      /the submitter's campaign store is corrupt/,
    );
  }, 60_000);

  it('samples.seq with no valid slot', async () => {
    const dir = await box.tempDir('vt-corrupt-node-');
    await cp(template, dir, { recursive: true });
    await writeFile(join(dir, 'samples.seq'), 'x'.repeat(512));
    await refused(
      ['start', '--data-dir', dir, ...NO_SERVER],
      join(dir, 'samples.seq'),
      /the sample log's sequence mark is corrupt.*delete this file/,
    );
  }, 60_000);

  it('after the refusal, moving samples.db aside as advised starts a node whose log continues after the mark', async () => {
    const dir = await box.tempDir('vt-corrupt-node-');
    await cp(template, dir, { recursive: true });
    // The node logs 5 samples (its own log, under its own peer id), then the file is damaged.
    const node = startNode(box, dir, NO_SERVER);
    const peer = await answering(dir);
    expect((await vtnode(['leave', '--data-dir', dir])).code).toBe(0);
    await node.proc.exited;
    expect(peer).toBe(signer.origin);
    const log = openSampleLog({ path: join(dir, 'samples.db'), origin: peer, signer });
    const { sampleBody } = await import('../helpers/samples.ts');
    for (let i = 0; i < 5; i++) log.append(sampleBody('t', 'qwen', i));
    log.close();
    await damage('garbage over page 1').apply(join(dir, 'samples.db'));
    await refused(['start', '--data-dir', dir, ...NO_SERVER], join(dir, 'samples.db'), /is corrupt/);
    await rename(join(dir, 'samples.db'), join(dir, 'samples.db.corrupt'));
    const again = startNode(box, dir, NO_SERVER);
    expect(await answering(dir)).toBe(peer);
    expect((await vtnode(['leave', '--data-dir', dir])).code).toBe(0);
    expect(await again.proc.exited).toBe(0);
    const reopened = openSampleLog({ path: join(dir, 'samples.db'), origin: peer, signer });
    expect(reopened.lostSince(0, 10)).toEqual([{ first: 1, last: 5 }]);
    expect(reopened.append(sampleBody('t', 'qwen', 9)).seq).toBe(6);
    reopened.close();
  }, 180_000);
});

describe('vtnode join and collect refuse a damaged database too', () => {
  it('join into a data dir whose samples.db is damaged', async () => {
    const dir = await box.tempDir('vt-corrupt-join-');
    // Joining again with the identity the log belongs to.
    await cp(join(template, 'identity.key'), join(dir, 'identity.key'));
    await cp(join(dbs, 'samples.db'), join(dir, 'samples.db'));
    await damage('garbage over pages in the middle').apply(join(dir, 'samples.db'));
    await refused(
      ['join', token, '--data-dir', dir, '--listen', '/ip4/127.0.0.1/tcp/0', ...NO_SERVER],
      join(dir, 'samples.db'),
      /the worker's sample log is corrupt/,
    );
  }, 60_000);

  it('collect into a dataset whose index is damaged', async () => {
    const dir = await box.tempDir('vt-corrupt-collect-');
    await cp(template, dir, { recursive: true });
    const ds = join(dir, 'dataset');
    await cp(join(dbs, 'ds'), ds, { recursive: true });
    await damage('garbage over pages in the middle').apply(join(ds, DATASET_DB));
    await refused(
      ['collect', '--data-dir', dir, '--out', ds, '--audit-fraction', '0'],
      join(ds, DATASET_DB),
      /the collector's dataset index is corrupt.*fresh --out/s,
    );
  }, 60_000);

  it('collect on a node whose campaigns.db is not a database', async () => {
    const dir = await dataDirWith('campaigns.db', 'a text file');
    const ds = join(dir, 'dataset');
    await mkdir(ds);
    await refused(
      ['collect', '--data-dir', dir, '--out', ds, '--audit-fraction', '0'],
      join(dir, 'campaigns.db'),
      /the submitter's campaign store is not a SQLite database/,
    );
    // Nothing was left running: the data dir has no control file of a live daemon.
    await rm(join(dir, 'control.json'), { force: false }).then(
      () => expect.fail('control.json was left behind'),
      (err: NodeJS.ErrnoException) => expect(err.code).toBe('ENOENT'),
    );
  }, 60_000);
});
