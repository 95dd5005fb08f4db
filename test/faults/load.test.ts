// The load drill (issue 11, Build 7) at CI size: bench/load.ts with k = 2, so 200 samples through 5
// nodes (emulated model servers, fast scoring script) and 2 collectors. The bench itself asserts that
// the campaign completes, that both collectors hold exactly the planned distinct samples and that their
// content digests agree; this test runs it as a user would and checks its report. The full 20,000-sample
// run (`node bench/load.ts`) is a bench: its figures are in docs/reliability.md.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../helpers/cli.ts';

interface LoadReport {
  samples: number;
  distinctInBothDatasets: number;
  peakRssMiB: Record<string, number>;
  lagMs: Record<string, { p50: number | null; p99: number | null }>;
}

function runBench(k: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(REPO, 'bench', 'load.ts'), '--k', String(k)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    // Bounded: the bench has its own timeouts; this one only keeps a stuck run from hanging CI.
    const timer = setTimeout(() => child.kill('SIGTERM'), 280_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('load drill at CI size', () => {
  it('200 samples through 5 nodes and 2 collectors: complete, and exactly 200 distinct samples in both datasets', async () => {
    const res = await runBench(2);
    expect(res.code, res.stderr.slice(-3000)).toBe(0);
    const report = JSON.parse(res.stdout) as LoadReport;
    expect(report.samples).toBe(200);
    expect(report.distinctInBothDatasets).toBe(200);
    expect(Object.keys(report.peakRssMiB)).toHaveLength(7);
    // Each collector measured the lag of every body it fetched, scoring to stored.
    for (const c of ['collector0', 'collector1']) {
      const { p50, p99 } = report.lagMs[c]!;
      expect(p50).toBeGreaterThan(0);
      expect(p99).toBeGreaterThanOrEqual(p50!);
    }
    console.log(`load drill: ${res.stdout.replace(/\s+/g, ' ')}`);
  }, 300_000);
});
