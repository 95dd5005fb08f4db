/**
 * One repository through the pipeline a new user runs: the bench's own reach (pairs), `mine`, and a
 * calibration of a deterministic sample of the mined tasks through the real sandbox scorer.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { MineError, mine } from '../../node/tasks/mine.ts';
import type { Task } from '../../protocol/task.ts';
import type { ScoreResult, Scorer } from '../../sandbox/scorer.ts';
import { type Coverage, coverageOf } from './coverage.ts';
import { type CommandRun, runMeasured, withChildrenCpu } from './cpu.ts';
import { type MinerGraphReach, minerGraphReach } from './miner-graph.ts';
import { computeReach } from './reach.ts';
import { groupReasons, type ReasonCount, sampleTasks } from './reasons.ts';

const run = promisify(execFile);

/** A repository (or workspace member) to measure. */
export interface RepoSpec {
  /** Short name shown in the tables. */
  name: string;
  /** Absolute path of the package to mine (a checkout, or a member of a monorepo checkout). */
  root: string;
  /** Test runner, as the person who set up the checkout recorded it (shown, never used). */
  runner?: string | undefined;
  /** Layout (single package, npm workspaces member, pnpm...), as recorded (shown, never used). */
  layout?: string | undefined;
}

/** One calibrated task. */
export interface CalibrationRow {
  taskId: string;
  kind: Task['kind'];
  target: string;
  testFiles: number;
  kept: boolean;
  reward: number | null;
  /** The scorer's reasons, or the error that made scoring throw. */
  reasons: string[];
  typecheck: string;
  /** CPU of the test run as the sandbox sampled it (a lower bound), ms; null without a run. */
  testsCpuMs: number | null;
  /** CPU of the type-check run as the sandbox sampled it, ms; null when it did not run. */
  typecheckCpuMs: number | null;
  /** How the type-check run ended (a wall-time kill is reported by the scorer as a failed check). */
  typecheckRun: { exitCode: number | null; timedOut: boolean; wallMs: number } | null;
  /**
   * CPU of the processes the score spawned on the host, exact, ms: box copies, and the runs themselves
   * only when unconfined (bwrap's runs are not reaped into this process's child accounting).
   */
  hostCpuMs: number;
  wallMs: number;
  /** The scorer's diagnostics, cut: what to read when diagnosing a drop. */
  diagnostics: string;
}

export interface RepoResult {
  spec: RepoSpec;
  commit: string | null;
  reach: { codeFiles: number; tests: number; withoutCode: number; durationMs: number };
  mine: {
    /** The miner's refusal (MineError message), or null when it mined. */
    refused: string | null;
    runner: string | null;
    tasks: number;
    file: number;
    tests: number;
    withoutTypecheck: number;
    wallMs: number;
    cpuMs: number;
    /** The miner's skip reasons, grouped. */
    skipped: ReasonCount[];
  };
  coverage: Coverage;
  /** The miner's own graph with the bench's test files (any runner): what it reaches even when mining is refused. */
  minerGraph: MinerGraphReach;
  calibration: {
    sampled: number;
    kept: number;
    /** Dropped tasks by their first reason (the cause: the scorer lists run failures first); sums to the drops. */
    dropped: ReasonCount[];
    /** Every reason of the dropped tasks, each counted once per task. */
    droppedAll: ReasonCount[];
    rows: CalibrationRow[];
  };
  /**
   * One unconfined fresh type-check: the first sampled task's argv, else `tsc --noEmit -p tsconfig.json`
   * when the package has one; what the scorer's type-check pays per candidate today.
   */
  freshTsc: (CommandRun & { from: 'task' | 'tsconfig.json' }) | null;
}

export interface MeasureOptions {
  /** Tasks calibrated per repository. */
  sample: number;
  /** Also run one unconfined fresh type-check per repository, for comparison. */
  tscBaseline: boolean;
  /** The scorer, created on first use (its self-test runs once for every repository). */
  scorer: () => Promise<Scorer>;
  /** Progress lines. */
  log: (line: string) => void;
  signal?: AbortSignal;
}

async function headCommit(root: string): Promise<string | null> {
  try {
    return (await run('git', ['-C', root, 'rev-parse', 'HEAD'])).stdout.trim();
  } catch {
    return null;
  }
}

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);

/**
 * The scorer's reasons for a reference below 1.0, with a type-check that was killed at its wall limit
 * told apart from one that found errors (the scorer says "failed" for both).
 */
function explained(result: ScoreResult): string[] {
  if (result.reasons.length === 0) return ['below 1.0'];
  const run = result.typecheckRun;
  if (!run?.timedOut) return result.reasons;
  const note = `(bench: the type-check run was killed at its wall limit after ${Math.round(run.usage.wallMs / 1000)} s)`;
  return result.reasons.map((r) => (r === 'the strict type-check failed' ? `${r} ${note}` : r));
}

/** Scores one task's reference in the sandbox and records what it cost. */
async function calibrateOne(
  scorer: Scorer,
  task: Task,
  root: string,
  signal?: AbortSignal,
): Promise<CalibrationRow> {
  const base = {
    taskId: task.id,
    kind: task.kind,
    target: task.target,
    testFiles: task.judge.testFiles.length,
  };
  const { value, cpuMs, wallMs } = await withChildrenCpu(async () => {
    try {
      const candidate = await readFile(join(root, task.target), 'utf8');
      return await scorer.score({ task, workspaceDir: root, candidate, ...(signal ? { signal } : {}) });
    } catch (err) {
      return err as Error;
    }
  });
  if (value instanceof Error)
    return {
      ...base,
      kept: false,
      reward: null,
      reasons: [`scoring threw: ${value.message}`],
      typecheck: 'not-run',
      testsCpuMs: null,
      typecheckCpuMs: null,
      typecheckRun: null,
      hostCpuMs: cpuMs,
      wallMs,
      diagnostics: cut(value.stack ?? value.message, 2000),
    };
  return {
    ...base,
    kept: value.reward === 1,
    reward: value.reward,
    reasons: value.reward === 1 ? [] : explained(value),
    typecheck: value.typecheck,
    testsCpuMs: value.run?.usage.cpuMs ?? null,
    typecheckCpuMs: value.typecheckRun?.usage.cpuMs ?? value.typecheckService?.cpuMs ?? null,
    typecheckRun: value.typecheckRun
      ? {
          exitCode: value.typecheckRun.exitCode,
          timedOut: value.typecheckRun.timedOut,
          wallMs: value.typecheckRun.usage.wallMs,
        }
      : null,
    hostCpuMs: cpuMs,
    wallMs,
    diagnostics: cut(value.diagnostics, 2000),
  };
}

/** The nearest `node_modules/.bin/<name>` at or above `dir` (hoisted workspaces keep it at the root). */
function binFor(dir: string, name: string): string | null {
  for (let d = dir; ; d = dirname(d)) {
    const bin = join(d, 'node_modules', '.bin', name);
    if (existsSync(bin)) return bin;
    if (dirname(d) === d) return null;
  }
}

/** The fresh type-check baseline, unconfined, with the package's own tsc. */
async function freshTsc(
  root: string,
  task: Task | undefined,
  signal?: AbortSignal,
): Promise<RepoResult['freshTsc']> {
  const fromTask = task?.judge.typecheck;
  const argv = fromTask
    ? fromTask[0] === 'npx'
      ? fromTask.slice(1)
      : fromTask
    : existsSync(join(root, 'tsconfig.json'))
      ? ['tsc', '--noEmit', '-p', 'tsconfig.json']
      : null;
  const bin = argv ? binFor(root, argv[0]!) : null;
  if (!argv || !bin) return null;
  const run = await runMeasured([bin, ...argv.slice(1)], root, 600_000, signal);
  return { ...run, from: fromTask ? 'task' : 'tsconfig.json' };
}

/** Mines the package, timed; a MineError (a refusal) is a result, not a failure. */
async function mineTimed(
  root: string,
  signal?: AbortSignal,
): Promise<{ tasks: Task[]; mine: RepoResult['mine'] }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let mined: Awaited<ReturnType<typeof mine>> | null = null;
  let refused: string | null = null;
  try {
    mined = await mine({ root, ...(signal ? { signal } : {}) });
  } catch (err) {
    if (!(err instanceof MineError)) throw err;
    refused = err.message;
  }
  const cpu = process.cpuUsage(cpu0);
  const summary = mined?.summary;
  return {
    tasks: mined?.tasks ?? [],
    mine: {
      refused,
      runner: summary?.runner ?? null,
      tasks: summary?.tasks ?? 0,
      file: summary?.byKind.file ?? 0,
      tests: summary?.byKind.tests ?? 0,
      withoutTypecheck: summary?.withoutTypecheck ?? 0,
      wallMs: Math.round(performance.now() - t0),
      cpuMs: Math.round((cpu.user + cpu.system) / 1000),
      skipped: groupReasons((summary?.skipped ?? []).map((s) => [s.reason])),
    },
  };
}

/** Calibrates `sample` one task at a time and groups the drops. */
async function calibrateSample(
  name: string,
  root: string,
  sample: readonly Task[],
  options: MeasureOptions,
): Promise<RepoResult['calibration']> {
  const rows: CalibrationRow[] = [];
  // The scorer (and its self-test) only for a repository that has something to calibrate.
  const scorer = sample.length > 0 ? await options.scorer() : null;
  for (const task of sample) {
    if (!scorer) break;
    options.signal?.throwIfAborted();
    const row = await calibrateOne(scorer, task, root, options.signal);
    rows.push(row);
    const outcome = row.kept ? 'kept' : `dropped (${row.reasons[0] ?? ''})`;
    options.log(`${name}: [${rows.length}/${sample.length}] ${task.kind}:${task.target} ${outcome}`);
  }
  const dropped = rows.filter((r) => !r.kept);
  return {
    sampled: rows.length,
    kept: rows.length - dropped.length,
    dropped: groupReasons(dropped.map((r) => r.reasons.slice(0, 1))),
    droppedAll: groupReasons(dropped.map((r) => r.reasons)),
    rows,
  };
}

/** Measures one repository: the bench's reach, the miner's graph, `mine`, a calibration, a fresh tsc. */
export async function measureRepo(spec: RepoSpec, options: MeasureOptions): Promise<RepoResult> {
  const { log, signal } = options;
  const commit = await headCommit(spec.root);
  const t0 = performance.now();
  const reach = await computeReach(spec.root, signal);
  const reachMs = Math.round(performance.now() - t0);
  log(`${spec.name}: ${reach.tests.length} tests reach ${reach.testsOf.size} sources (${reach.pairs} pairs)`);
  const minerGraph = await minerGraphReach(spec.root, reach, signal);
  const { tasks, mine: mined } = await mineTimed(spec.root, signal);
  log(`${spec.name}: ${mined.refused ? `mine refused: ${mined.refused}` : `${tasks.length} tasks mined`}`);
  const sample = sampleTasks(tasks, options.sample);
  const calibration = await calibrateSample(spec.name, spec.root, sample, options);
  const withTypecheck = sample.find((t) => t.judge.typecheck !== null);
  return {
    spec,
    commit,
    reach: {
      codeFiles: reach.codeFiles,
      tests: reach.tests.length,
      withoutCode: reach.withoutCode.length,
      durationMs: reachMs,
    },
    mine: mined,
    coverage: coverageOf(reach, tasks),
    minerGraph,
    calibration,
    freshTsc: options.tscBaseline ? await freshTsc(spec.root, withTypecheck, signal) : null,
  };
}
