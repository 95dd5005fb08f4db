import { randomBytes } from 'node:crypto';
import { mkdir, readFile, realpath } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Task } from '../protocol/task.ts';
import { type Box, boxCwd, createBox, insideBox } from './box.ts';
import { type Confinement, REPORT_FD, type RunResult } from './confinement.ts';
import { sharedExecOnlyNode } from './exec-only-node.ts';
import { HARNESS_DIR, harnessSetup, instrumentTestFile } from './integrity/rewrite.ts';
import {
  SENTINEL_KEY_VARIABLE,
  type SentinelReading,
  type SentinelSeal,
  splitSentinels,
} from './integrity/sentinel.ts';
import { judgeFor } from './judges/index.ts';
import type { Judge } from './judges/judge.ts';
import { MAX_REPORT_BYTES, readReport } from './judges/read-report.ts';
import { exitCodeDisagreement, type Verdict, VerdictError } from './judges/verdict.ts';
import { type Limits, limitsFor } from './limits.ts';
import type { ReferenceTime } from './overrun.ts';
import { removeTestFiles } from './replay/prune.ts';

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
  /**
   * The reference's own run time under the same tests (scaled by `timeScale` too): a run that outlives
   * it by the hang rule with a CPU on offer is the candidate's timeout. Absent (the reference's own run):
   * a run the backstop ends is an infrastructure failure.
   */
  reference?: ReferenceTime;
  /** Remove every test file and test folder from the box before the overlay is written (a replay run). */
  pruneTests?: boolean;
  /**
   * Run the box's node with these arguments (given the box folder) instead of the task's runner: no report
   * is read (`verdict` stays null); what the run wrote comes back through `collect`.
   */
  nodeArgs?: (box: string) => string[];
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
/** Preloaded into every node process of a box (see the module). */
const NO_INSPECTOR = join(HARNESS_DIR, 'no-inspector.cjs');
/** Preloaded into the runner's main process when its report leaves through the report pipe. */
const REPORT_FD_PRELOAD = join(HARNESS_DIR, 'report-fd.cjs');
/** The report pipe as a path the runner opens: only Linux re-opens a pipe through its fd's path. */
const PIPE_REPORTS = process.platform === 'linux';

/** One NODE_OPTIONS token, quoted when it holds white space or quotes (Node's own quoting). */
function optionToken(token: string): string {
  return /[\s"'\\]/.test(token) ? JSON.stringify(token) : token;
}

/**
 * NODE_OPTIONS of every node process of a box: SIGUSR1 opens no inspector, the inspector API is refused
 * (no-inspector.cjs), then the task's own options. Runners keep NODE_OPTIONS in the environment of the
 * processes they start (vitest's and jest's forks, node:test's per-file children, mocha's re-spawn).
 */
export function boxNodeOptions(judgeOptions = ''): string {
  return ['--disable-sigusr1', optionToken(`--require=${NO_INSPECTOR}`), judgeOptions].join(' ').trim();
}

/** The node the judges start in a box: the exec-only copy on Linux (non-dumpable processes). */
async function boxNode(): Promise<string> {
  return process.platform === 'linux' ? await sharedExecOnlyNode() : NODE;
}

/** The text of the run's report, from the report pipe or the report file; VerdictError when unusable. */
async function reportText(run: RunResult, reportPath: string | null): Promise<string> {
  if (reportPath !== null) return await readReport(reportPath);
  const piped = run.report;
  if (!piped || piped.text === '') throw new VerdictError('the runner wrote no report');
  if (piped.overflow) throw new VerdictError(`the report is larger than ${MAX_REPORT_BYTES} bytes`);
  return piped.text;
}

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

/** How the reason of a run the hang rule judged the candidate's begins (ScoreResult status `timeout`). */
export const TIMEOUT_REASON = 'timeout';

/** Classifies what happened to the confined process, before any report is read. */
function processFailure(run: RunResult, limits: Limits): Pick<JudgeRun, 'failure' | 'infra'> | null {
  if (run.aborted) return { failure: null, infra: 'the run was aborted' };
  if (run.setupFailed)
    return { failure: null, infra: `the sandbox could not start the run: ${run.setupFailed}` };
  if (run.cpuExceeded)
    return {
      failure: `the candidate exhausted its CPU budget (${(limits.cpuMs / 1000).toFixed(1)} s)`,
      infra: null,
    };
  if (run.limitExceeded) return { failure: `the run exceeded its ${run.limitExceeded} limit`, infra: null };
  if (run.timedOut && run.overrun?.verdict === 'timeout')
    return { failure: `${TIMEOUT_REASON}: ${run.overrun.why}`, infra: null };
  if (run.timedOut)
    return {
      failure: null,
      infra: run.overrun
        ? `the run hit its wall-clock limit of ${Math.round(limits.wallMs / 1000)} s starved of CPU: ${run.overrun.why}`
        : `the run hit its wall-clock limit of ${Math.round(limits.wallMs / 1000)} s without exhausting its CPU budget (a loaded machine?)`,
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
      NODE_OPTIONS: boxNodeOptions(judgeEnv.NODE_OPTIONS),
    };
  }

  async function readOnlyFor(box: Box, judge: Judge | null): Promise<string[]> {
    const paths = [...box.linked, TOOLCHAIN, HARNESS_DIR, ...(judge?.readOnlyPaths() ?? [])];
    const node = await boxNode();
    if (node !== NODE) paths.push(dirname(node));
    if (options.packageCache) {
      const real = await realpath(options.packageCache).catch(() => null);
      if (real) paths.push(real);
    }
    return paths;
  }

  async function confined(request: JudgeRunRequest, box: Box, judge: Judge): Promise<JudgeRun> {
    const { task } = request;
    const testFiles = request.testFiles ?? task.judge.testFiles;
    const scale = request.timeScale ?? 1;
    const limits = limitsFor(Math.round(task.judge.timeoutMs * scale), options.baseLimits);
    const reference = request.reference
      ? { wallMs: request.reference.wallMs * scale, cpuMs: request.reference.cpuMs * scale }
      : undefined;
    const { overlay, protect } = await judgedOverlay(request, box.dir, testFiles);
    if (request.pruneTests) await removeTestFiles(box.dir, task.judge.testFiles);
    await box.write(overlay);
    if (request.nodeArgs)
      return await nodeRun(request, request.nodeArgs(box.dir), box, judge, limits, protect);
    const piped = judge.reportPipe && PIPE_REPORTS;
    const reportPath = piped ? null : await reportFile(box.dir);
    // A monorepo member with its own runner config runs from its folder (judge.cwd).
    const cwd = boxCwd(box, task.judge.cwd);
    const node = await boxNode();
    const argv = await judge.argv(
      { box: box.dir, cwd, node, reportPath: reportPath ?? `/proc/self/fd/${REPORT_FD}` },
      testFiles,
    );
    // The run's sentinel key: the harness seals each file's report with it (record.cjs), the host checks.
    const seal: SentinelSeal | null =
      request.harness === false ? null : { key: randomBytes(32), box: box.dir };
    const env = envFor(box.dir, task.judge.env);
    if (seal) env[SENTINEL_KEY_VARIABLE] = seal.key.toString('hex');
    const run = await confinement.run({
      argv: [...(piped ? mainPreloaded(argv, node) : argv), ...(request.extraArgs ?? [])],
      cwd,
      box: box.dir,
      readOnlyPaths: await readOnlyFor(box, judge),
      protectedPaths: protect.map((p) => join(box.dir, p)),
      env: piped ? { ...env, VTNODE_REPORT_FD: String(REPORT_FD) } : env,
      limits,
      ...(reference ? { reference } : {}),
      ...(piped ? { reportPipe: { maxBytes: MAX_REPORT_BYTES } } : {}),
      ...(request.signal ? { signal: request.signal } : {}),
    });
    const collected = await collect(box.dir, request.collect ?? []);
    const void_ = processFailure(run, limits);
    const none = { run, verdict: null, sentinels: new Map(), exitDisagreement: null, collected };
    if (void_) return { ...none, ...void_ };
    let full: Verdict;
    try {
      full = judge.parse(await reportText(run, reportPath), box.dir);
    } catch (err) {
      if (err instanceof VerdictError) return { ...none, failure: err.message, infra: null };
      throw err;
    }
    const exitDisagreement = exitCodeDisagreement(full, run.exitCode);
    const split = seal ? splitSentinels(full, testFiles, seal) : { verdict: full, sentinels: new Map() };
    return { run, ...split, exitDisagreement, failure: null, infra: null, collected };
  }

  /** A plain node run in the box (JudgeRunRequest.nodeArgs): classified like a judge's, without a report. */
  async function nodeRun(
    request: JudgeRunRequest,
    args: string[],
    box: Box,
    judge: Judge,
    limits: Limits,
    protect: string[],
  ): Promise<JudgeRun> {
    const cwd = boxCwd(box, request.task.judge.cwd);
    const run = await confinement.run({
      argv: [await boxNode(), ...args],
      cwd,
      box: box.dir,
      readOnlyPaths: await readOnlyFor(box, judge),
      protectedPaths: protect.map((p) => join(box.dir, p)),
      env: envFor(box.dir, request.task.judge.env),
      limits,
      ...(request.signal ? { signal: request.signal } : {}),
    });
    const collected = await collect(box.dir, request.collect ?? []);
    const void_ = processFailure(run, limits);
    return {
      run,
      verdict: null,
      sentinels: new Map(),
      exitDisagreement: null,
      failure: void_?.failure ?? null,
      infra: void_?.infra ?? null,
      collected,
    };
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

/** A fresh report file in the box (runners whose report cannot leave through the pipe). */
async function reportFile(box: string): Promise<string> {
  const reportDir = join(box, '.vtnode');
  await mkdir(reportDir, { recursive: true, mode: 0o755 });
  return join(reportDir, `report-${randomBytes(8).toString('hex')}.json`);
}

/** The judge's argv with report-fd.cjs preloaded into its main process (argv[0] must be the box's node). */
function mainPreloaded(argv: string[], node: string): string[] {
  if (argv[0] !== node) throw new Error(`the judge's command does not start with node (${argv[0]})`);
  return [node, '--require', REPORT_FD_PRELOAD, ...argv.slice(1)];
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
