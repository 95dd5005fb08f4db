import type { ChildProcess } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CollectorStatus } from '../../node/collector/node.ts';
import { eventually, Sandbox, vtnode } from '../helpers/cli.ts';
import { collectorStatus } from '../helpers/collect.ts';
import { INTERVAL, initFleet } from '../helpers/fleet.ts';
import { notYet } from '../helpers/poll.ts';
import { sampleTask } from '../helpers/samples.ts';
import { workerProc } from './helpers.ts';

const box = new Sandbox();
const workers: ChildProcess[] = [];

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  await box.cleanup();
});

/** Every file under `dir`, by relative path. */
async function files(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out[relative(dir, p)] = await readFile(p, 'utf8');
    }
  };
  await walk(dir);
  return out;
}

describe('collectors converge after a worker died for good (separate processes on loopback)', () => {
  it('a collector started after the worker died gets its digests and bodies from another collector: byte-identical exports, nobody suspect', async () => {
    const { dataDir: d1, token } = await initFleet(box, 'converge');
    const ds1 = join(await box.tempDir('vt-ds1-'), 'dataset');
    const ds2 = join(await box.tempDir('vt-ds2-'), 'dataset');
    const d2 = await box.tempDir('vt-c2-');
    // The tasks the workers' samples answer (worker-proc.ts: `<namespace>-task-<i % 10>`), one group each.
    const tasksFile = join(d2, 'tasks.jsonl');
    const tasks = Array.from({ length: 10 }, (_, i) => {
      const id = `w1-task-${i}`;
      return { ...sampleTask(id, `write ${id}`), group: id };
    });
    await writeFile(tasksFile, tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
    const c1 = box.spawn([
      'collect',
      '--data-dir',
      d1,
      '--out',
      ds1,
      '--tasks',
      tasksFile,
      '--catch-up-interval',
      '2s',
    ]);
    await c1.waitFor(/is collecting/);

    // w1 logs 40 samples; w2 redoes the first 20 of them (same sample ids, same candidates: an
    // honest redo), as a submitter does with the jobs of a worker it lost.
    const logs = await box.tempDir('vt-workers-');
    const w1 = workerProc(workers, {
      token,
      logPath: join(logs, 'w1.db'),
      name: 'w1',
      total: 40,
      intervalMs: 20,
    });
    await w1.waitFor(/done/);
    const w2 = workerProc(workers, {
      token,
      logPath: join(logs, 'w2.db'),
      name: 'w2',
      total: 20,
      intervalMs: 20,
      namespace: 'w1',
    });
    await w2.waitFor(/done/);
    const complete = (s: CollectorStatus | null) =>
      s && s.stats.digests === 60 && s.stats.bodies === 60 && s.stats.pending === 0 ? s : null;
    await eventually(async () => complete(await collectorStatus(d1)), 40_000, 'collector 1 complete');

    // w1 dies for good; only then does collector 2 start: w1's digests and bodies exist only at c1.
    await w1.kill();
    const c2 = box.spawn([
      'collect',
      '--data-dir',
      d2,
      '--token',
      token,
      '--listen',
      '/ip4/127.0.0.1/tcp/0',
      '--advert-interval',
      INTERVAL,
      '--out',
      ds2,
      '--tasks',
      tasksFile,
      '--catch-up-interval',
      '2s',
    ]);
    await c2.waitFor(/is collecting/);
    const s2 = await eventually(
      async () => complete(await collectorStatus(d2)),
      60_000,
      'collector 2 complete',
    );
    // Collector 1's snapshot is awaited too (another process's file): both complete, the same content.
    const s1 = await eventually(
      async () => {
        const s = complete(await collectorStatus(d1));
        return s && s.contentDigest === s2.contentDigest
          ? s
          : notYet({ c1: s?.contentDigest, c2: s2.contentDigest });
      },
      20_000,
      'collector 1 to hold what collector 2 holds',
    );
    // No honest worker (nor the other collector) is suspect at either collector.
    for (const s of [s1, s2]) {
      expect(s.trust.map((t) => t.suspect)).toEqual(s.trust.map(() => false));
      expect(s.trust.map((t) => t.highWater).sort((a, b) => a - b)).toEqual([20, 40]);
    }

    c1.child.kill('SIGTERM');
    c2.child.kill('SIGTERM');
    expect(await c1.exited).toBe(0);
    expect(await c2.exited).toBe(0);
    for (const format of ['mlx', 'hf']) {
      const outs = [join(d1, `export-${format}`), join(d2, `export-${format}`)];
      for (const [i, ds] of [ds1, ds2].entries()) {
        const r = await vtnode(['export', '--from', ds, '--format', format, '--out', outs[i]!]);
        expect(r.code, r.stderr).toBe(0);
      }
      const [f1, f2] = await Promise.all(outs.map(files));
      const manifest = JSON.parse(f1!['manifest.json']!);
      // Every verified sample of w1 (reward 1 for 3 of 4) is a row: 30 rows, none left out for want of a task.
      expect(manifest.counts.rows).toBe(30);
      expect(manifest.counts.missingTasks).toBe(0);
      expect(f2).toEqual(f1);
    }
    // The redone samples count once: 40 sample ids, 20 of them held by two origins.
    const r1 = await vtnode(['report', '--from', ds1, '--json']);
    const r2 = await vtnode(['report', '--from', ds2, '--json']);
    expect(r2.stdout).toBe(r1.stdout);
    const samples = JSON.parse(r1.stdout).models.reduce(
      (a: number, m: { samples: number }) => a + m.samples,
      0,
    );
    expect(samples).toBe(40);
  }, 120_000);
});
