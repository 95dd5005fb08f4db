import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { digestOf } from '../../node/digests/codec.ts';
import { signatureError } from '../../node/digests/signature.ts';
import { openDatabase } from '../../node/sqlite.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { SignedDigest } from '../../protocol/digest.ts';
import { taskHash } from '../../protocol/task.ts';
import { seededSigner } from '../helpers/digests.ts';
import { sampleBody, sampleTask } from '../helpers/samples.ts';

const SIGNER = await seededSigner(3);
const ORIGIN = SIGNER.origin;
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-samplelog-tasks-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const open = (maxTaskRows?: number) =>
  openSampleLog({
    path: join(dir, 'samples.db'),
    origin: ORIGIN,
    signer: SIGNER,
    ...(maxTaskRows ? { maxTaskRows } : {}),
  });

describe('sample log: task rows', () => {
  it('keeps the task row of a sample by hash, and signs a v2 digest committing to it', () => {
    const log = open();
    const task = sampleTask('t1');
    const logged = log.append(sampleBody('t1', 'qwen', 0), task);
    expect(logged.taskHash).toBe(taskHash(task));
    const [d] = log.digestsSince(0, 10);
    expect(d).toMatchObject({ v: 2, taskHash: taskHash(task), seq: 1 });
    expect(SignedDigest.parse(d)).toEqual(d);
    expect(signatureError(d!)).toBeNull();
    // The digest gossiped for the sample is the one served on /vtnode/log/2, signature and all.
    expect(digestOf(logged)).toEqual(d);
    expect(signatureError(digestOf(logged))).toBeNull();
    expect(log.getTaskRows([taskHash(task)])).toEqual([{ hash: taskHash(task), task }]);
    log.close();
  });

  it('serves rows in the order asked, skipping hashes it does not hold', () => {
    const log = open();
    const [a, b] = [sampleTask('a'), sampleTask('b')];
    log.append(sampleBody('a', 'qwen', 0), a);
    log.append(sampleBody('b', 'qwen', 0), b);
    const unknown = `sha256:${'0'.repeat(64)}`;
    expect(log.getTaskRows([taskHash(b), unknown, taskHash(a)]).map((r) => r.task.id)).toEqual(['b', 'a']);
    expect(log.getTaskRows([unknown])).toEqual([]);
    log.close();
  });

  it('a sample appended without its task keeps a v1 digest (a log from before task rows)', () => {
    const log = open();
    const logged = log.append(sampleBody('t1', 'qwen', 0));
    expect(logged.taskHash).toBeNull();
    const [d] = log.digestsSince(0, 10);
    expect(d!.v).toBe(1);
    expect('taskHash' in d!).toBe(false);
    expect(digestOf(logged)).toEqual(d);
    expect(signatureError(d!)).toBeNull();
    log.close();
  });

  it('refuses a task row that is not the sample’s task, naming it', () => {
    const log = open();
    expect(() => log.append(sampleBody('t1', 'qwen', 0), sampleTask('t2'))).toThrow(/task row: id: is t2/);
    expect(() => log.append(sampleBody('t1', 'qwen', 0), sampleTask('t1', 'another prompt'))).toThrow(
      /task row: id/,
    );
    expect(() => log.append(sampleBody('t1', 'qwen', 0), { ...sampleTask('t1'), target: '/etc' })).toThrow(
      /task row: target/,
    );
    expect(log.counts().samples).toBe(0);
    log.close();
  });

  it('is bounded: the rows of the jobs run least recently go first', () => {
    const log = open(3);
    const tasks = ['a', 'b', 'c', 'd'].map((id) => sampleTask(id));
    for (const [i, t] of tasks.entries()) log.append(sampleBody(t.id, 'qwen', i), t);
    // a ran again after d: it is the most recent, b the least.
    log.append(sampleBody('a', 'qwen', 9), tasks[0]!);
    log.append(sampleBody('e', 'qwen', 0), sampleTask('e'));
    const held = log.getTaskRows([...tasks, sampleTask('e')].map(taskHash)).map((r) => r.task.id);
    expect(held).toEqual(['a', 'd', 'e']);
    log.close();
  });

  it('keeps rows and v2 digests across a reopen; a row damaged on disk is not served', () => {
    const task = sampleTask('t1');
    let log = open();
    log.append(sampleBody('t1', 'qwen', 0), task);
    log.close();
    log = open();
    expect(log.digestsSince(0, 10)[0]).toMatchObject({ v: 2, taskHash: taskHash(task) });
    expect(log.getTaskRows([taskHash(task)])).toHaveLength(1);
    log.close();
    const db = openDatabase(join(dir, 'samples.db'));
    db.prepare('UPDATE tasks SET json = ?').run(JSON.stringify({ ...task, split: 'eval' }));
    db.close();
    log = open();
    expect(log.getTaskRows([taskHash(task)])).toEqual([]);
    log.close();
  });

  it('opens a log written before task rows were kept: old rows stay v1, new ones are v2', () => {
    const path = join(dir, 'samples.db');
    let log = open();
    log.append(sampleBody('t1', 'qwen', 0));
    log.close();
    // The schema of the release before: no task_hash column, no tasks table.
    const db = openDatabase(path);
    db.exec('DROP TABLE tasks; ALTER TABLE samples DROP COLUMN task_hash');
    db.close();
    log = open();
    log.append(sampleBody('t1', 'qwen', 1), sampleTask('t1'));
    const digests = log.digestsSince(0, 10);
    expect(digests.map((d) => d.v)).toEqual([1, 2]);
    for (const d of digests) expect(signatureError(d)).toBeNull();
    log.close();
  });
});
