// The wait of the fault drill (issue 29): `collectorHolds` (helpers/collect.ts) must not resolve while a
// body the campaign planned is still on its way. A real collector process and a worker process whose
// sample server withholds its LAST body until the test releases it (worker-proc.ts VT_WITHHOLD_LAST): the
// helper is still waiting once the collector holds the other N-1 bodies and has asked for the last one,
// and resolves with all N once it is released.
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Sandbox } from '../helpers/cli.ts';
import { collectorHolds, collectorLacks, collectorStatus } from '../helpers/collect.ts';
import { initFleet } from '../helpers/fleet.ts';
import { notYet, pollFor } from '../helpers/poll.ts';
import { workerProc, workerProcBody } from './helpers.ts';

const box = new Sandbox();
const workers: ChildProcess[] = [];

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  await box.cleanup();
});

/** Samples the worker logs: the last one's body is withheld. */
const N = 6;

describe('collectorHolds waits for the last body', () => {
  it('has not resolved while the last body is withheld (the other N-1 held); resolves with all N once it is served', async () => {
    const { dataDir, token } = await initFleet(box, 'holds');
    const dataset = join(dataDir, 'dataset');
    const collector = box.spawn([
      'collect',
      '--data-dir',
      dataDir,
      '--out',
      dataset,
      '--catch-up-interval',
      '1s',
    ]);
    await collector.waitFor(/is collecting/, 60_000);
    const plan = { name: 'w' };
    const ids = Array.from({ length: N }, (_, i) => workerProcBody(plan, i).sampleId);
    const want = new Set(ids);
    const lastId = ids[N - 1]!;

    const logs = await box.tempDir('vt-holds-');
    const worker = workerProc(workers, {
      token,
      logPath: join(logs, 'w.db'),
      ...plan,
      total: N,
      intervalMs: 20,
      withholdLast: true,
    });
    // Started as a campaign's end would start it: before the last body reached the collector.
    let resolved: string[] | null = null;
    const held = collectorHolds({ dataDir, dataset, want, what: `the ${N} samples`, timeoutMs: 90_000 }).then(
      (rows) => {
        resolved = rows.map((r) => r.sampleId);
        return rows;
      },
    );
    held.catch(() => {});

    // The state the drill's race was about: every other body in, the last one asked for and not served.
    await worker.waitFor(/^done$/m);
    const before = await pollFor(
      async () => {
        const { rows, lack } = await collectorLacks({ dataDir, dataset, want });
        const asked = /withheld seq \d+/.test(worker.output());
        const ok = lack?.missing.length === 1 && lack.missing[0] === lastId && lack.pending === 1 && asked;
        return ok ? rows : notYet({ lack, asked });
      },
      {
        what: `the collector to hold ${N - 1} bodies and have asked for the withheld one`,
        timeoutMs: 60_000,
        pauseMs: 100,
      },
    );
    expect(before.map((r) => r.sampleId).sort()).toEqual(ids.slice(0, N - 1).sort());
    // Asked again by a catch-up (the collector keeps it pending): still withheld, still waiting.
    const asks = (worker.output().match(/withheld seq/g) ?? []).length;
    await worker.waitFor(new RegExp(`(withheld seq \\d+\\n[^]*){${asks + 1}}`), 30_000);
    expect((await collectorStatus(dataDir))?.stats.pending).toBe(1);
    expect(resolved).toBeNull();

    worker.child.kill('SIGUSR2');
    await worker.waitFor(/^released$/m);
    const rows = await held;
    expect(rows.map((r) => r.sampleId).sort()).toEqual([...ids].sort());
    expect(resolved).toHaveLength(N);
    expect((await collectorStatus(dataDir))?.stats.pending).toBe(0);

    await worker.kill();
    collector.child.kill('SIGTERM');
    expect(await collector.exited).toBe(0);
  }, 180_000);
});
