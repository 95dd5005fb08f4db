import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CollectorStatus } from '../../node/collector/node.ts';
import { eventually, Sandbox, vtnode } from '../helpers/cli.ts';
import { collectorStatus } from '../helpers/collect.ts';
import { INTERVAL, initFleet } from '../helpers/fleet.ts';
import { workerProc } from './helpers.ts';

const box = new Sandbox();
const workers: ChildProcess[] = [];

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  await box.cleanup();
});

/** A worker process (test/collect/worker-proc.ts) producing `total` samples. */
const worker = (token: string, logPath: string, name: string, total: number, intervalMs: number) =>
  workerProc(workers, { token, logPath, name, total, intervalMs });

describe('vtnode collect (separate processes on loopback)', () => {
  it('two collectors, one killed mid-run and restarted, end with identical, complete datasets', async () => {
    const { dataDir: d1, token } = await initFleet(box, 'collect');
    const ds1 = join(await box.tempDir('vt-ds1-'), 'dataset');
    const ds2 = join(await box.tempDir('vt-ds2-'), 'dataset');
    const d2 = await box.tempDir('vt-c2-');
    const c1 = box.spawn(['collect', '--data-dir', d1, '--out', ds1, '--catch-up-interval', '2s']);
    await c1.waitFor(/is collecting/);
    const c2Args = [
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
      '--catch-up-interval',
      '2s',
    ];
    let c2 = box.spawn(c2Args);
    await c2.waitFor(/is collecting/);

    const logs = await box.tempDir('vt-workers-');
    const w1 = worker(token, join(logs, 'w1.db'), 'w1', 120, 25);
    const w2 = worker(token, join(logs, 'w2.db'), 'w2', 120, 25);
    await w1.waitFor(/seq 30\n/);
    c2.child.kill('SIGKILL');
    await c2.exited;
    await Promise.all([w1.waitFor(/done/), w2.waitFor(/done/)]);
    c2 = box.spawn(c2Args.filter((a, i) => a !== '--token' && c2Args[i - 1] !== '--token'));
    await c2.waitFor(/is collecting/);

    const complete = (s: CollectorStatus | null) =>
      s && s.stats.digests === 240 && s.stats.bodies === 240 && s.stats.pending === 0 ? s : null;
    const s1 = await eventually(
      async () => complete(await collectorStatus(d1)),
      40_000,
      'collector 1 complete',
    );
    const s2 = await eventually(
      async () => complete(await collectorStatus(d2)),
      40_000,
      'collector 2 complete',
    );
    expect(s2.contentDigest).toBe(s1.contentDigest);
    // The restarted collector got what it missed over /vtnode/log/2, not from gossip.
    await c2.waitFor(/caught up \d+ digests of \S+ from/);
    expect(s1.trust.map((t) => t.trust)).toEqual([1, 1]);
    expect(s1.trust.map((t) => t.highWater)).toEqual([120, 120]);

    c1.child.kill('SIGTERM');
    c2.child.kill('SIGTERM');
    expect(await c1.exited).toBe(0);
    expect(await c2.exited).toBe(0);
    expect(c1.output()).toMatch(
      /collector stopped: 240 samples \(240 digests\), 240 bodies, 0 pending, 0 rejected/,
    );
    const r1 = await vtnode(['report', '--from', ds1, '--json']);
    const r2 = await vtnode(['report', '--from', ds2, '--json']);
    expect(r1.code, r1.stderr).toBe(0);
    expect(r2.stdout).toBe(r1.stdout);
    expect(
      JSON.parse(r1.stdout).models.map((m: { model: string; samples: number }) => [m.model, m.samples]),
    ).toEqual([
      ['llama', 120],
      ['qwen', 120],
    ]);
  }, 150_000);

  it('refuses to run outside a fleet and names the fix', async () => {
    const d = await box.tempDir('vt-nofleet-');
    const r = await vtnode(['collect', '--data-dir', d, '--out', join(d, 'ds')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not in a fleet/);
    const r2 = await vtnode(['collect', '--data-dir', d]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/--out DATASET is required/);
  }, 30_000);
});
