// The miner and the scorer agree: every task mined from the example corpus has a reference that
// scores 1.0 in the real sandbox (calibration keeps them all).
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { mineLedger } from '../helpers/campaign.ts';
import { Sandbox, vtnode } from '../helpers/cli.ts';

const box = new Sandbox();
afterAll(() => box.cleanup());

it('vtnode calibrate keeps every task mined from examples/ledger', async () => {
  const dir = await box.tempDir('vt-calibrate-');
  const { file, tasks } = await mineLedger(dir);
  expect(tasks.length).toBeGreaterThan(20);
  const out = join(dir, 'kept.jsonl');
  const res = await vtnode(['calibrate', '--tasks', file, '--out', out, '--jobs', '2', '--json'], {
    timeoutMs: 900_000,
  });
  expect(res.code, res.stderr).toBe(0);
  const summary = JSON.parse(res.stdout) as { kept: number; dropped: { taskId: string; reason: string }[] };
  expect(summary.dropped).toEqual([]);
  expect(summary.kept).toBe(tasks.length);
}, 900_000);
