import { randomBytes } from 'node:crypto';
import { mkdir, readFile, realpath } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Task } from '../protocol/task.ts';
import { type Box, boxCwd, createBox, insideBox } from './box.ts';
import type { Confinement, RunResult } from './confinement.ts';
import { HARNESS_DIR, harnessSetup, instrumentTestFile } from './integrity/rewrite.ts';
import { type SentinelReading, splitSentinels } from './integrity/sentinel.ts';
import { judgeFor } from './judges/index.ts';
import type { Judge } from './judges/judge.ts';
import { readReport } from './judges/read-report.ts';
import { exitCodeDisagreement, type Verdict, VerdictError } from './judges/verdict.ts';
import { type Limits, limitsFor } from './limits.ts';

/** One judged run of a task's tests in a fresh box, classified. */
export interface JudgeRun {
  /** The confined run, or null when it never started (see `infra`). */
  run: RunResult | null;
  /** Per-test results without the sentinels; null when the run is void. */
  verdict: Verdict | null;
  /** What each judged file's sentinel reported (empty when the harness is off or the run is void). */
  sentinels: Map<string, SentinelReading>;
  /** The verdict disagrees with the runner's exit code (the candidate's doing: reward 0). */
  exitDisagreement: string | null;
  /** Why the run is void by the candidate's doing (reward 0), or null. */
  failure: string | null;
  /** Why the run could not judge anything (infrastructure: retry, never a reward), or null. */
  infra: string | null;
  /** Files the request asked to read back from the box after the run (null: absent or unreadable). */
  collected: Map<string, string | null>;
}

export interface JudgeRunnerOptions {
  confinement: Confinement;
  /** Where boxes are created (default: $TMPDIR/vtnode-boxes). */
  boxesDir?: string;
  /** Limits other than the wall time, which comes from each task's judge. */
  baseLimits: Limits;
  /** Read-only package cache made visible to runs, or null. */
  packageCache: string | null;
}

export interface JudgeRunRequest {
  task: Task;
  workspaceDir: string;
  /** Files written over the box: box-relative path → content (the candidate). */
  overlay: Record<string, string>;
  /** Test files to run (box-relative); default the task's judge test files. */
  testFiles?: string[];
  /** Instrument the judged files with the integrity harness (default true). */
  harness?: boolean;
  /** Arguments appended to the judge's argv (vitest's `--isolate=false` for a shared-registry mutation run). */
  extraArgs?: string[];
  /** Box-relative files to read back after the run (untrusted: read like a report). */
  collect?: string[];
  /** The run's wall and CPU budgets are the task's times this factor (a batched run of many copies). */
  timeScale?: number;
  signal?: AbortSignal;
}

/** Runs a task's judge in fresh boxes: the harness, the confinement and the verdict's classification. */
export interface JudgeRunner {
  run(request: JudgeRunRequest): Promise<JudgeRun>;
  /** The environment of every confined run in a box (also used by the type-check), with the judge's variables. */
  envFor(box: string, judgeEnv?: Record<string, string>): Record<string, string>;
  /** The read-only paths a run in this box needs. */
  readOnlyFor(box: Box, judge: Judge | null): Promise<string[]>;
}

const NODE = process.execPath;
const TOOLCHAIN = dirname(dirname(NODE));

/** The box files of a judged run: the candidate, then each judged test file with the harness woven in. */
async function judgedOverlay(
  request: JudgeRunRequest,
  box: string,
  testFiles: string[],
): Promise<{ overlay: Record<string, string>; protect: string[] }> {
  const overlay = { ...request.overlay };
  if (request.harness === false) return { overlay, protect: Object.keys(overlay) };
  const setup = harnessSetup(request.task.judge.runner, box);
  for (const file of testFiles) {
    const text = overlay[file] ?? (await readFile(insideBox(request.workspaceDir, file), 'utf8'));
    overlay[file] = instrumentTestFile(text, file, setup, join(box, file));
  }
  if (setup.entry) overlay[setup.entry.path] = setup.entry.text;
  return { overlay, protect: Object.keys(overlay) };
}

/** Classifies what happened to the confined process, before any report is read. */
function processFailure(run: RunResult, limits: Limits): Pick<JudgeRun, 'failure' | 'infra'> | null {
  if (run.aborted) return { failure: null, infra: 'the run was aborted' };
  if (run.cpuExceeded)
    return {
      failure: `the candidate exhausted its CPU budget (${(limits.cpuMs / 1000).toFixed(1)} s)`,
      infra: null,
    };
  if (run.limitExceeded) return { failure: `the run exceeded its ${run.limitExceeded} limit`, infra: null };
  if (run.timedOut)
    return {
      failure: null,
      infra: `the run hit its wall-clock limit of ${Math.round(limits.wallMs / 1000)} s without exhausting its CPU budget (a loaded machine?)`,
    };
  if (run.outputCapped)
    return { failure: `the run printed more than ${limits.outputBytes} bytes`, infra: null };
  if (run.survivors > 0) return { failure: `${run.survivors} process(es) outlived the run`, infra: null };
  return null;
}

export function createJudgeRunner(options: JudgeRunnerOptions): JudgeRunner {
  const { confinement } = options;

  function envFor(box: string, judgeEnv: Record<string, string> = {}): Record<string, string> {
    return {
      PATH: `${join(box, 'node_modules', '.bin')}:${dirname(NODE)}:/usr/bin:/bin`,
      HOME: join(box, '.home'),
      TMPDIR: join(box, '.tmp'),
      LANG: 'C.UTF-8',
      // Every node judges in the same zone (the host's would make verdicts differ between nodes).
      TZ: 'UTC',
      CI: '1',
      NO_COLOR: '1',
      NODE_ENV: 'test',
      ...judgeEnv,
    };
  }

  async function readOnlyFor(box: Box, judge: Judge | null): Promise<string[]> {
    const paths = [...box.linked, TOOLCHAIN, HARNESS_DIR, ...(judge?.readOnlyPaths() ?? [])];
    if (options.packageCache) {
      const real = await realpath(options.packageCache).catch(() => null);
      if (real) paths.push(real);
    }
    return paths;
  }

  async function confined(request: JudgeRunRequest, box: Box, judge: Judge): Promise<JudgeRun> {
    const { task } = request;
    const testFiles = request.testFiles ?? task.judge.testFiles;
    const limits = limitsFor(Math.round(task.judge.timeoutMs * (request.timeScale ?? 1)), options.baseLimits);
    const { overlay, protect } = await judgedOverlay(request, box.dir, testFiles);
    await box.write(overlay);
    const reportDir = join(box.dir, '.vtnode');
    await mkdir(reportDir, { recursive: true, mode: 0o755 });
    const reportPath = join(reportDir, `report-${randomBytes(8).toString('hex')}.json`);
    // A monorepo member with its own runner config runs from its folder (judge.cwd).
    const cwd = boxCwd(box, task.judge.cwd);
    const run = await confinement.run({
      argv: [
        ...(await judge.argv({ box: box.dir, cwd, node: NODE, reportPath }, testFiles)),
        ...(request.extraArgs ?? []),
      ],
      cwd,
      box: box.dir,
      readOnlyPaths: await readOnlyFor(box, judge),
      protectedPaths: protect.map((p) => join(box.dir, p)),
      env: envFor(box.dir, task.judge.env),
      limits,
      ...(request.signal ? { signal: request.signal } : {}),
    });
    const collected = await collect(box.dir, request.collect ?? []);
    const void_ = processFailure(run, limits);
    const none = { run, verdict: null, sentinels: new Map(), exitDisagreement: null, collected };
    if (void_) return { ...none, ...void_ };
    let full: Verdict;
    try {
      full = judge.parse(await readReport(reportPath), box.dir);
    } catch (err) {
      if (err instanceof VerdictError) return { ...none, failure: err.message, infra: null };
      throw err;
    }
    const exitDisagreement = exitCodeDisagreement(full, run.exitCode);
    const split =
      request.harness === false ? { verdict: full, sentinels: new Map() } : splitSentinels(full, testFiles);
    return { run, ...split, exitDisagreement, failure: null, infra: null, collected };
  }

  return {
    envFor,
    readOnlyFor,
    async run(request) {
      const judge = judgeFor(request.task.judge.runner);
      let box: Box;
      try {
        box = await createBox({
          workspace: request.workspaceDir,
          ...(options.boxesDir ? { boxesDir: options.boxesDir } : {}),
        });
      } catch (err) {
        return failedToStart(`the box could not be set up: ${(err as Error).message}`);
      }
      try {
        return await confined(request, box, judge);
      } catch (err) {
        return failedToStart(`the judge could not run: ${(err as Error).message}`);
      } finally {
        await box.dispose();
      }
    },
  };
}

function failedToStart(infra: string): JudgeRun {
  return {
    run: null,
    verdict: null,
    sentinels: new Map(),
    exitDisagreement: null,
    failure: null,
    infra,
    collected: new Map(),
  };
}

/** Reads files back from a box the way reports are read: never through a link the run planted. */
async function collect(box: string, paths: string[]): Promise<Map<string, string | null>> {
  const out = new Map<string, string | null>();
  for (const p of paths) out.set(p, await readReport(insideBox(box, p)).catch(() => null));
  return out;
}
