// Runs test files the way the scorer runs a candidate: one box with an overlay, the judge's argv (or
// any command) under the given confinement, the report parsed into a verdict. Shared by the tests
// and bench/mutation.ts.
import { randomBytes } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createBox } from '../../../sandbox/box.ts';
import type { Confinement, RunResult } from '../../../sandbox/confinement.ts';
import { judgeFor } from '../../../sandbox/judges/index.ts';
import { readReport } from '../../../sandbox/judges/read-report.ts';
import type { Verdict } from '../../../sandbox/judges/verdict.ts';
import { parseVitestReport } from '../../../sandbox/judges/vitest.ts';
import { limitsFor } from '../../../sandbox/limits.ts';
import {
  type KillMatrix,
  killMatrix,
  type MutationCoverage,
  type MutationPlan,
  parseCoverage,
  type Registry,
} from '../../../sandbox/mutation/plan.ts';

/** `/usr/bin/time` inside the box measures the CPU of the whole process tree (children it waited for). */
const TIME = '/usr/bin/time';

export interface BoxRun {
  run: RunResult;
  /** User + system CPU seconds of the command and every descendant it waited for. */
  cpuSeconds: number;
  /** Box-relative files read back after the run (missing ones left out). */
  files: Map<string, string>;
}

export interface CommandOptions {
  confinement: Confinement;
  /** The workspace the box clones. */
  workspace: string;
  /** Files written over the clone. */
  overlay: Record<string, string>;
  /** The command, given the box's absolute path. */
  argv: (box: string) => Promise<string[]>;
  /** Extra read-only paths (the judge's reporter). */
  readOnly?: string[];
  /** Box-relative files to read back. */
  read?: string[];
  /** Wall-clock limit of the run. */
  wallMs?: number;
  signal?: AbortSignal;
}

/** Runs one command confined in a fresh box, under `/usr/bin/time`; the box is removed afterwards. */
export async function runCommandInBox(options: CommandOptions): Promise<BoxRun> {
  const box = await createBox({ workspace: options.workspace, overlay: options.overlay });
  try {
    await mkdir(join(box.dir, '.vtnode'), { mode: 0o755 });
    const timeFile = join(box.dir, '.vtnode', 'time.txt');
    const node = process.execPath;
    const run = await options.confinement.run({
      argv: [TIME, '-f', '%U %S', '-o', timeFile, ...(await options.argv(box.dir))],
      cwd: box.dir,
      box: box.dir,
      readOnlyPaths: [...box.linked, dirname(dirname(await realpath(node))), ...(options.readOnly ?? [])],
      env: {
        PATH: `${join(box.dir, 'node_modules', '.bin')}:${dirname(node)}:/usr/bin:/bin`,
        HOME: join(box.dir, '.home'),
        TMPDIR: join(box.dir, '.tmp'),
        LANG: 'C.UTF-8',
        CI: '1',
        NO_COLOR: '1',
        NODE_ENV: 'test',
      },
      limits: limitsFor(options.wallMs ?? 180_000),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (run.timedOut || run.survivors > 0 || run.outputCapped || run.aborted)
      throw new Error(
        `the run failed: ${JSON.stringify({ ...run, stdout: run.stdout.slice(-2000), stderr: run.stderr.slice(-2000) })}`,
      );
    const [user, sys] = (await readReport(timeFile)).trim().split('\n').pop()!.split(' ').map(Number);
    const files = new Map<string, string>();
    for (const f of options.read ?? []) {
      const text = await readReport(join(box.dir, f)).catch(() => null);
      if (text !== null) files.set(f, text);
    }
    return { run, cpuSeconds: user! + sys!, files };
  } finally {
    await box.dispose();
  }
}

export interface TestRun extends BoxRun {
  verdict: Verdict;
}

/** Runners the harness drives. */
export type HarnessRunner = 'vitest' | 'node:test' | 'jest';

/** What the harness needs from a judge: the argv, the extra read-only paths, the report parser. */
interface HarnessJudge {
  argv(box: string, reportPath: string, testFiles: string[]): Promise<string[]>;
  readOnly: string[];
  parse(text: string, box: string): Verdict;
}

/**
 * The scorer's judge for vitest and node:test. sandbox/judges has no jest judge yet, so jest is
 * driven here the same way: `--json` writes the document vitest's JSON reporter imitates (same
 * fields), `--runTestsByPath` takes exact paths instead of regular expressions.
 */
function harnessJudge(runner: HarnessRunner, registry: Registry): HarnessJudge {
  if (registry === 'shared' && runner !== 'vitest') throw new Error(`${runner} has no shared-registry mode`);
  if (runner === 'jest')
    return {
      argv: async (box, reportPath, testFiles) => [
        process.execPath,
        join(box, 'node_modules', 'jest', 'bin', 'jest.js'),
        '--ci',
        '--json',
        `--outputFile=${reportPath}`,
        '--watchman=false',
        '--runTestsByPath',
        ...testFiles.map((f) => join(box, f)),
      ],
      readOnly: [],
      parse: parseVitestReport,
    };
  const judge = judgeFor(runner);
  // The scorer's judges take no options yet: the shared registry's flag is appended here.
  const extra = registry === 'shared' ? ['--isolate=false'] : [];
  return {
    argv: async (box, reportPath, testFiles) => [
      ...(await judge.argv({ box, cwd: box, node: process.execPath, reportPath }, testFiles)),
      ...extra,
    ],
    readOnly: judge.readOnlyPaths(),
    parse: (text, box) => judge.parse(text, box),
  };
}

/** Runs test files with the runner's judge in a fresh confined box and parses the verdict. */
export async function runTestsInBox(
  options: Omit<CommandOptions, 'argv'> & { runner: HarnessRunner; testFiles: string[]; registry?: Registry },
): Promise<TestRun> {
  const judge = harnessJudge(options.runner, options.registry ?? 'per-file');
  const report = `.vtnode/report-${randomBytes(8).toString('hex')}.json`;
  let boxDir = '';
  const r = await runCommandInBox({
    ...options,
    readOnly: [...(options.readOnly ?? []), ...judge.readOnly],
    read: [...(options.read ?? []), report],
    argv: async (box) => {
      boxDir = box;
      return judge.argv(box, join(box, report), options.testFiles);
    },
  });
  const text = r.files.get(report);
  if (text === undefined) throw new Error(`the runner wrote no report: ${r.run.stderr.slice(-2000)}`);
  return { ...r, verdict: judge.parse(text, boxDir) };
}

export interface PlanResult {
  matrix: KillMatrix;
  /** The reference copy's coverage, or null when it wrote none. */
  coverage: MutationCoverage | null;
}

/**
 * Runs several plans over one workspace in one confined box and one runner invocation (their
 * overlays must agree where they overlap), and maps the verdict to kills per plan.
 */
export async function runPlans(
  confinement: Confinement,
  workspace: string,
  plans: MutationPlan[],
  options: { wallMs?: number; signal?: AbortSignal } = {},
): Promise<TestRun & { results: PlanResult[] }> {
  const overlay: Record<string, string> = {};
  for (const p of plans)
    for (const [path, text] of Object.entries(p.overlay)) {
      if (overlay[path] !== undefined && overlay[path] !== text) throw new Error(`plans disagree on ${path}`);
      overlay[path] = text;
    }
  const modes = new Set(plans.map((p) => `${p.runner} ${p.registry}`));
  if (modes.size !== 1) throw new Error('plans of one run must share their runner and registry');
  const r = await runTestsInBox({
    confinement,
    workspace,
    overlay,
    runner: plans[0]!.runner,
    registry: plans[0]!.registry,
    testFiles: plans.flatMap((p) => p.testFiles),
    read: plans.map((p) => p.coverageFile),
    ...options,
  });
  const results = plans.map((p) => {
    const cov = r.files.get(p.coverageFile);
    return { matrix: killMatrix(p, r.verdict), coverage: cov === undefined ? null : parseCoverage(cov) };
  });
  return { ...r, results };
}
