import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCollector } from '../../node/collector/collector.ts';
import { exportDataset } from '../../node/collector/export.ts';
import { selectRows, taskFinder } from '../../node/collector/select.ts';
import { type DatasetStore, openDatasetStore } from '../../node/collector/store.ts';
import { newPsk } from '../../node/data-dir.ts';
import { digestOf } from '../../node/digests/codec.ts';
import { createTaskServer, fetchTaskRows, type TaskSource } from '../../node/digests/task-server.ts';
import type { Host } from '../../node/fleet/host.ts';
import type { SampleLog } from '../../node/worker/sample-log.ts';
import type { Task } from '../../protocol/task.ts';
import { taskHash } from '../../protocol/task.ts';
import { TASK_PROTOCOL } from '../../protocol/topics.ts';
import { sampleBody, sampleTask } from '../helpers/samples.ts';
import { connect, serveLog, tempDir, testHost, testWorker } from './helpers.ts';

let psk: string;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const hosts: Host[] = [];
const stores: DatasetStore[] = [];

beforeAll(async () => {
  psk = newPsk();
  tmp = await tempDir('vtnode-task-rows-');
});
afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
  for (const s of stores) s.close();
  await tmp.cleanup();
});

function store(name: string): DatasetStore {
  const s = openDatasetStore(join(tmp.dir, name));
  stores.push(s);
  return s;
}

/** The task of a test sample: its prompt is the helpers' default, so the body's promptFingerprint matches. */
const task = (id: string): Task => ({ ...sampleTask(id), group: id });

/** A row altered as a lying node would: same id, another prompt and judge. */
const tampered = (t: Task): Task => ({
  ...t,
  messages: [{ role: 'user', content: 'write add() and print process.env' }],
  judge: { ...t.judge, testFiles: ['test/always.test.ts'] },
});

/** A worker on a real host: its sample log, its fetch servers, /vtnode/task/1 from `tasks` (default: its log). */
async function worker(name: string, opts: { tasks?: (log: SampleLog) => TaskSource | null } = {}) {
  const w = await testWorker(psk, join(tmp.dir, `${name}.db`));
  hosts.push(w.host);
  await serveLog(w.host, w.log);
  const source = opts.tasks ? opts.tasks(w.log) : w.log;
  if (source) await createTaskServer({ host: w.host, source });
  return {
    ...w,
    peer: w.host.peerId.toString(),
    /** Logs samples of these tasks (reward 1), each with its task row, as an executor does. */
    run(tasks: Task[], seedBase: number) {
      return tasks.map((t, i) =>
        digestOf(
          w.log.append(
            sampleBody(t.id, 'qwen', i, {
              seedBase,
              candidate: `export const add = () => ${seedBase + i};\n`,
            }),
            t,
          ),
        ),
      );
    },
  };
}

describe('dataset store: task rows', () => {
  it('keeps rows by hash with their source, lists the hashes digests name that it lacks, serves verified rows only', () => {
    const s = store('unit');
    const [a, b] = [task('a'), task('b')];
    expect(s.putTasks([a], 'file:/x/tasks.jsonl')).toBe(1);
    s.putTaskRow(taskHash(b), b, '12D3KooWpeer');
    // A row already held keeps its first source.
    s.putTaskRow(taskHash(b), b, '12D3KooWother');
    expect([...s.taskRows()].map(([h, r]) => [h, r.task.id, r.source]).sort()).toEqual(
      [
        [taskHash(a), 'a', 'file:/x/tasks.jsonl'],
        [taskHash(b), 'b', '12D3KooWpeer'],
      ].sort(),
    );
    expect(
      s.getTaskRows([taskHash(b), `sha256:${'0'.repeat(64)}`, taskHash(a)]).map((r) => r.task.id),
    ).toEqual(['b', 'a']);
    expect(s.missingTaskRows()).toEqual([]);
  });

  it('a v2 sample takes only the row its signed hash names: a file row of the same id with other content is not its task', async () => {
    const w = await worker('sel');
    const t = task('t');
    const [d] = w.run([t], 1000);
    const s = store('select');
    s.addDigest(d!);
    s.putBody(d!, w.log.get(d!.sampleId)!.body);
    expect(s.missingTaskRows()).toEqual([{ hash: taskHash(t), origins: [w.peer] }]);
    // A tasks file with an altered row of the same id: held by id, never used for this sample.
    s.putTasks([tampered(t)], 'file:tasks.jsonl');
    const find = taskFinder(s.tasks(), s.taskRows());
    expect(find(d!)).toBeUndefined();
    expect(selectRows(s.samples(), find, 1)).toMatchObject({ rows: [], missingTasks: ['t'] });
    expect(s.missingTaskRows()).toHaveLength(1);
    // The true row (from the file too) is verified by its hash and used.
    s.putTasks([t], 'file:tasks.jsonl');
    expect(s.missingTaskRows()).toEqual([]);
    const sel = selectRows(s.samples(), taskFinder(s.tasks(), s.taskRows()), 1);
    expect(sel.rows.map((r) => r.task)).toEqual([t]);
    // A digest that names the hash of another task's row has no task.
    const other = task('other');
    const find2 = taskFinder(new Map(), new Map([[taskHash(other), { task: other }]]));
    expect(find2({ ...d!, taskHash: taskHash(other) })).toBeUndefined();
    expect(find2({ ...d!, taskId: 'other', taskHash: taskHash(other) })).toEqual(other);
  });
});

describe('collector: task rows over /vtnode/task/1 (real hosts over TCP)', () => {
  it('with no tasks file, fetches each sample’s task row from the workers that ran it and exports with provenance', async () => {
    const w1 = await worker('honest1');
    const w2 = await worker('honest2');
    const tasks = ['a', 'b', 'c'].map(task);
    w1.run(tasks, 1000);
    w2.run([tasks[2]!, task('d')], 2000);
    const h = await testHost(psk);
    hosts.push(h);
    await connect(h, w1.host);
    await connect(h, w2.host);
    const s = store('honest');
    const c = createCollector({ host: h, peers: () => [w1.peer, w2.peer], store: s, auditFraction: 0 });
    await c.catchUp();
    await c.idle();
    expect(s.counts()).toMatchObject({ digests: 5, bodies: 5, pending: 0 });
    const rows = s.taskRows();
    expect([...rows.values()].map((r) => r.task.id).sort()).toEqual(['a', 'b', 'c', 'd']);
    for (const [hash, r] of rows) {
      expect(taskHash(r.task)).toBe(hash);
      // Each from a node that ran it (c was run by both: either).
      const ranBy = r.task.id === 'd' ? [w2.peer] : r.task.id === 'c' ? [w1.peer, w2.peer] : [w1.peer];
      expect(ranBy).toContain(r.source);
    }
    expect(s.missingTaskRows()).toEqual([]);
    expect(c.stats().taskRowsRejected).toBe(0);

    const out = join(tmp.dir, 'honest-export');
    const manifest = await exportDataset({ store: s, format: 'hf', out });
    expect(manifest.counts.missingTasks).toBe(0);
    expect(manifest.taskRows.map((r) => r.taskId).sort()).toEqual(['a', 'b', 'c', 'd']);
    for (const r of manifest.taskRows) expect(r.source).toBe(rows.get(r.hash)!.source);
    const exported = (await readFile(join(out, 'data', 'train.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { task_id: string; prompt: unknown });
    expect(new Set(exported.map((r) => r.task_id))).toEqual(new Set(['a', 'b', 'c', 'd']));
    for (const r of exported) expect(r.prompt).toEqual(task(r.task_id).messages);
    await c.stop();
  });

  it('rejects a tampered row (an offence of the node that served it), takes the true row from another node, and never exports a wrong row', async () => {
    const honest = await worker('h');
    const liar = await worker('liar', {
      tasks: (log) => ({
        getTaskRows: (hashes) =>
          log.getTaskRows(hashes).map((r) => ({ hash: r.hash, task: tampered(r.task) })),
      }),
    });
    const shared = task('shared');
    const own = task('liar-only');
    // The liar ran `shared` first: while it is the only node that signed it, it is asked first.
    liar.run([shared, own], 3000);
    const h = await testHost(psk);
    hosts.push(h);
    await connect(h, honest.host);
    await connect(h, liar.host);
    const s = store('tamper');
    const offences: { peer: string; why: string }[] = [];
    const c = createCollector({
      host: h,
      peers: () => [liar.peer],
      store: s,
      auditFraction: 0,
      onOffence: (peer, why) => offences.push({ peer, why }),
    });
    await c.catchUp();
    await c.idle();
    expect(s.counts()).toMatchObject({ digests: 2, bodies: 2 });
    expect(s.taskRows().size).toBe(0);
    expect(
      s
        .missingTaskRows()
        .map((m) => m.hash)
        .sort(),
    ).toEqual([taskHash(shared), taskHash(own)].sort());
    expect(c.stats().taskRowsRejected).toBe(2);
    expect(offences.map((o) => o.peer)).toEqual([liar.peer, liar.peer]);
    expect(offences[0]!.why).toMatch(/served a false task row \(the row hashes to sha256:[0-9a-f]{64}, not /);
    expect(s.origin(liar.peer)!.conflicts).toBe(2);
    // Nothing of a missing task is exported.
    const m1 = await exportDataset({ store: s, format: 'hf', out: join(tmp.dir, 'tamper-1') });
    expect(m1.counts).toMatchObject({ rows: 0, missingTasks: 2 });
    expect(m1.taskRows).toEqual([]);

    // The honest node runs `shared` too: the next catch-up gets the true row from it.
    honest.run([shared], 4000);
    const c2 = createCollector({
      host: h,
      peers: () => [honest.peer, liar.peer],
      store: s,
      auditFraction: 0,
      onOffence: (peer, why) => offences.push({ peer, why }),
    });
    await c.stop();
    await c2.catchUp();
    await c2.idle();
    expect([...s.taskRows()].map(([hash, r]) => [hash, r.task, r.source])).toEqual([
      [taskHash(shared), shared, honest.peer],
    ]);
    expect(s.missingTaskRows().map((m) => m.hash)).toEqual([taskHash(own)]);
    expect(offences.every((o) => o.peer === liar.peer)).toBe(true);
    const out = join(tmp.dir, 'tamper-2');
    const m2 = await exportDataset({ store: s, format: 'hf', out });
    expect(m2.taskRows).toEqual([{ hash: taskHash(shared), taskId: 'shared', source: honest.peer }]);
    expect(m2.counts.missingTasks).toBe(1);
    const text = await readFile(join(out, 'data', 'train.jsonl'), 'utf8');
    expect(text).not.toMatch(/process\.env|always\.test/);
    // Both claims of `shared` (liar's and honest's samples) use the true row.
    const exported = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { task_id: string; prompt: unknown });
    expect(exported.map((r) => r.task_id)).toEqual(['shared', 'shared']);
    for (const r of exported) expect(r.prompt).toEqual(shared.messages);
    await c2.stop();
  });

  it('a node absent when first asked serves its rows at a later catch-up', async () => {
    const w = await worker('late', { tasks: () => null });
    const t = task('late');
    w.run([t], 5000);
    const h = await testHost(psk);
    hosts.push(h);
    await connect(h, w.host);
    const s = store('late');
    const c = createCollector({ host: h, peers: () => [w.peer], store: s, auditFraction: 0 });
    await c.catchUp();
    await c.idle();
    expect(s.counts().bodies).toBe(1);
    expect(s.missingTaskRows()).toHaveLength(1);
    expect(c.stats().fetchErrors).toBeGreaterThan(0);
    // The worker starts serving task rows (a restart): the periodic catch-up retries.
    await createTaskServer({ host: w.host, source: w.log });
    await c.catchUp();
    await c.idle();
    expect([...s.taskRows().values()].map((r) => [r.task, r.source])).toEqual([[t, w.peer]]);
    await c.stop();
  });

  it('the client refuses a row served under a hash it did not ask for', async () => {
    const t = task('x');
    const other = task('y');
    const h = await testHost(psk);
    const server = await testHost(psk);
    hosts.push(h, server);
    await createTaskServer({
      host: server,
      source: { getTaskRows: () => [{ hash: taskHash(other), task: other }] },
    });
    await connect(h, server);
    await expect(
      fetchTaskRows(h, server.peerId.toString(), [taskHash(t)], { signal: AbortSignal.timeout(10_000) }),
    ).rejects.toThrow(/sent task row sha256:[0-9a-f]{64}, which was not asked for/);
    expect(TASK_PROTOCOL).toBe('/vtnode/task/1');
  });
});
