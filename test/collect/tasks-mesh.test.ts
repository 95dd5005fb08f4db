import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../node/collector/export.ts';
import type { CollectorStatus } from '../../node/collector/node.ts';
import { taskHash } from '../../protocol/task.ts';
import { eventually, Sandbox, vtnode } from '../helpers/cli.ts';
import { collectorStatus } from '../helpers/collect.ts';
import { initFleet } from '../helpers/fleet.ts';
import { sampleTask } from '../helpers/samples.ts';
import { workerProc } from './helpers.ts';

// `vtnode collect` with no --tasks: the task rows of the samples it collects come from the workers
// that ran them (/vtnode/task/1), each checked against the hash the worker signed in its digest.

const box = new Sandbox();
const workers: ChildProcess[] = [];

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  await box.cleanup();
});

/** The task row worker-proc.ts logs for a task id (see VT_TASK_ROWS there). */
const rowOf = (id: string) => ({ ...sampleTask(id), group: id });

/** Starts a collector with no tasks file; resolves once it is collecting. */
async function collector(name: string) {
  const { dataDir, token } = await initFleet(box, name);
  const ds = join(await box.tempDir('vt-ds-'), 'dataset');
  const proc = box.spawn(['collect', '--data-dir', dataDir, '--out', ds, '--catch-up-interval', '2s']);
  await proc.waitFor(/is collecting/);
  expect(proc.output()).toMatch(/task rows fetched from the nodes that ran the samples/);
  return { dataDir, token, ds, proc };
}

/** Exports `ds` as hf into a fresh folder: the manifest and the rows. */
async function exportHf(ds: string) {
  const out = join(await box.tempDir('vt-export-'), 'hf');
  const r = await vtnode(['export', '--from', ds, '--format', 'hf', '--out', out]);
  expect(r.code, r.stderr).toBe(0);
  const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as Manifest;
  const text = await readFile(join(out, 'data', 'train.jsonl'), 'utf8');
  const rows = text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { task_id: string; prompt: unknown; sample_id: string });
  return { manifest, rows, text };
}

describe('vtnode collect without --tasks (separate processes on loopback)', () => {
  it('collects the verified samples of 2 workers and exports them with task rows fetched from the workers, provenance in the manifest', async () => {
    const c = await collector('tasksmesh');
    const logs = await box.tempDir('vt-workers-');
    const w1 = workerProc(workers, {
      token: c.token,
      logPath: join(logs, 'w1.db'),
      name: 'w1',
      total: 12,
      intervalMs: 25,
      namespace: 'a',
      taskRows: 'honest',
    });
    const w2 = workerProc(workers, {
      token: c.token,
      logPath: join(logs, 'w2.db'),
      name: 'w2',
      total: 12,
      intervalMs: 25,
      namespace: 'b',
      taskRows: 'honest',
    });
    await Promise.all([w1.waitFor(/done/), w2.waitFor(/done/)]);
    const [p1, p2] = [w1, w2].map((w) => /ready (\S+)/.exec(w.output())![1]!);

    const complete = (s: CollectorStatus | null) => {
      if (s && s.stats.bodies === 24 && s.stats.pending === 0 && s.stats.taskRowsMissing === 0) return s;
      throw new Error(`not complete: ${JSON.stringify(s?.stats)}`);
    };
    const s = await eventually(
      async () => complete(await collectorStatus(c.dataDir)),
      40_000,
      'collector complete',
    );
    expect(s.stats.taskRowsRejected).toBe(0);

    const { manifest, rows } = await exportHf(c.ds);
    // 12 samples per worker, every fourth failed: 9 verified rows each, over 3 tasks each.
    expect(manifest.counts).toMatchObject({ rows: 18, tasks: 6, missingTasks: 0 });
    const expected = [
      ...['a-task-0', 'a-task-1', 'a-task-2'].map((id) => ({
        hash: taskHash(rowOf(id)),
        taskId: id,
        source: p1,
      })),
      ...['b-task-0', 'b-task-1', 'b-task-2'].map((id) => ({
        hash: taskHash(rowOf(id)),
        taskId: id,
        source: p2,
      })),
    ].sort((x, y) => (x.hash < y.hash ? -1 : 1));
    expect(manifest.taskRows).toEqual(expected);
    expect(rows).toHaveLength(18);
    for (const r of rows) expect(r.prompt).toEqual(rowOf(r.task_id).messages);

    c.proc.child.kill('SIGTERM');
    expect(await c.proc.exited).toBe(0);
  }, 120_000);

  it('rejects a tampered task row served by a lying worker, keeps the true row from the honest one, and exports no sample of a task only the liar served', async () => {
    const c = await collector('tasksmesh-liar');
    const logs = await box.tempDir('vt-workers-');
    const honest = workerProc(workers, {
      token: c.token,
      logPath: join(logs, 'honest.db'),
      name: 'honest',
      total: 12,
      intervalMs: 25,
      namespace: 'camp',
      taskRows: 'honest',
    });
    const liar = workerProc(workers, {
      token: c.token,
      logPath: join(logs, 'liar.db'),
      name: 'liar',
      total: 12,
      intervalMs: 25,
      namespace: 'camp',
      taskRows: 'tamper',
    });
    await Promise.all([honest.waitFor(/done/), liar.waitFor(/done/)]);
    const [ph, pl] = [honest, liar].map((w) => /ready (\S+)/.exec(w.output())![1]!);

    // The liar's own task is served by the liar only, altered: rejected, and missing for good.
    const settled = (s: CollectorStatus | null) => {
      if (
        s &&
        s.stats.bodies === 24 &&
        s.stats.pending === 0 &&
        s.stats.taskRowsRejected > 0 &&
        s.stats.taskRowsMissing === 1
      )
        return s;
      throw new Error(`not settled: ${JSON.stringify(s?.stats)}`);
    };
    const s = await eventually(
      async () => settled(await collectorStatus(c.dataDir)),
      40_000,
      'collector settled',
    );
    const liarTrust = s.trust.find((t) => t.origin === pl)!;
    expect(liarTrust.conflicts).toBeGreaterThan(0);
    expect(liarTrust.suspect).toBe(true);
    expect(s.trust.find((t) => t.origin === ph)!.conflicts).toBe(0);
    await c.proc.waitFor(
      /rejected task row sha256:[0-9a-f]{64} \(task liar-own-task\) from \S+: the row hashes to/,
    );

    const { manifest, rows, text } = await exportHf(c.ds);
    // Every row used came from the honest worker, under the hash both workers signed.
    expect(manifest.taskRows).toEqual(
      ['camp-task-0', 'camp-task-1', 'camp-task-2']
        .map((id) => ({ hash: taskHash(rowOf(id)), taskId: id, source: ph }))
        .sort((x, y) => (x.hash < y.hash ? -1 : 1)),
    );
    expect(manifest.counts.missingTasks).toBe(1);
    expect(text).not.toMatch(/TAMPERED/);
    expect(rows.some((r) => r.task_id === 'liar-own-task')).toBe(false);
    for (const r of rows) expect(r.prompt).toEqual(rowOf(r.task_id).messages);

    c.proc.child.kill('SIGTERM');
    expect(await c.proc.exited).toBe(0);
  }, 120_000);
});
