// Runs a mutation plan the way the scorer runs a candidate: one box with the plan's overlay, the
// judge's argv under the given confinement, the report parsed into a verdict. Shared by the tests
// and bench/mutation.ts.
import { randomBytes } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createBox } from '../../../sandbox/box.ts';
import type { Confinement, RunResult } from '../../../sandbox/confinement.ts';
import { judgeFor } from '../../../sandbox/judges/index.ts';
import { readReport } from '../../../sandbox/judges/read-report.ts';
import type { Verdict } from '../../../sandbox/judges/verdict.ts';
import { limitsFor } from '../../../sandbox/limits.ts';
import {
  type KillMatrix,
  killMatrix,
  type MutationCoverage,
  type MutationPlan,
  parseCoverage,
} from '../../../sandbox/mutation/plan.ts';

export interface BatchedRun {
  run: RunResult;
  verdict: Verdict;
  matrix: KillMatrix;
  /** The reference copy's coverage, or null when it wrote none. */
  coverage: MutationCoverage | null;
}

export interface RunOptions {
  confinement: Confinement;
  /** The workspace the box clones. */
  workspace: string;
  /** Files written over the clone. */
  overlay: Record<string, string>;
  runner: 'vitest' | 'node:test';
  /** Box-relative test files to run. */
  testFiles: string[];
  /** Wall-clock limit of the run. */
  wallMs?: number;
  signal?: AbortSignal;
}

/** Runs test files in a fresh confined box; returns the run, its verdict and the box-relative files asked for. */
export async function runInBox(
  options: RunOptions,
  read: string[] = [],
): Promise<{ run: RunResult; verdict: Verdict; files: Map<string, string> }> {
  const judge = judgeFor(options.runner);
  const box = await createBox({ workspace: options.workspace, overlay: options.overlay });
  try {
    const reportPath = join(box.dir, '.vtnode', `report-${randomBytes(8).toString('hex')}.json`);
    await mkdir(dirname(reportPath), { mode: 0o755 });
    const node = process.execPath;
    const argv = await judge.argv({ box: box.dir, node, reportPath }, options.testFiles);
    const run = await options.confinement.run({
      argv,
      cwd: box.dir,
      box: box.dir,
      readOnlyPaths: [...box.linked, dirname(dirname(await realpath(node))), ...judge.readOnlyPaths()],
      env: {
        PATH: `${join(box.dir, 'node_modules', '.bin')}:${dirname(node)}:/usr/bin:/bin`,
        HOME: join(box.dir, '.home'),
        TMPDIR: join(box.dir, '.tmp'),
        LANG: 'C.UTF-8',
        CI: '1',
        NO_COLOR: '1',
        NODE_ENV: 'test',
      },
      limits: limitsFor(options.wallMs ?? 120_000),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (run.timedOut || run.survivors > 0 || run.outputCapped)
      throw new Error(
        `the run failed: ${JSON.stringify({ ...run, stdout: run.stdout.slice(-2000), stderr: run.stderr.slice(-2000) })}`,
      );
    const verdict = judge.parse(await readReport(reportPath), box.dir);
    const files = new Map<string, string>();
    for (const f of read) {
      const text = await readReport(join(box.dir, f)).catch(() => null);
      if (text !== null) files.set(f, text);
    }
    return { run, verdict, files };
  } finally {
    await box.dispose();
  }
}

/** Runs a plan in one confined box and maps its verdict to kills. */
export async function runPlan(
  confinement: Confinement,
  workspace: string,
  plan: MutationPlan,
  options: { wallMs?: number; signal?: AbortSignal } = {},
): Promise<BatchedRun> {
  const { run, verdict, files } = await runInBox(
    {
      confinement,
      workspace,
      overlay: plan.overlay,
      runner: plan.runner as 'vitest' | 'node:test',
      testFiles: plan.testFiles,
      ...options,
    },
    [plan.coverageFile],
  );
  const cov = files.get(plan.coverageFile);
  return {
    run,
    verdict,
    matrix: killMatrix(plan, verdict),
    coverage: cov === undefined ? null : parseCoverage(cov),
  };
}
