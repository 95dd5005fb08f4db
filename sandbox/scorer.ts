import { randomBytes } from 'node:crypto';
import { mkdir, readFile, realpath } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { sha256Hex } from '../protocol/canonical.ts';
import type { Task } from '../protocol/task.ts';
import { type Box, createBox, insideBox, sweepStaleBoxes } from './box.ts';
import type { Confinement, RunResult, SelfTestResult } from './confinement.ts';
import { evaluationFingerprint } from './fingerprint.ts';
import { judgeFor } from './judges/index.ts';
import type { Judge } from './judges/judge.ts';
import { readReport } from './judges/read-report.ts';
import {
  countCases,
  exitCodeDisagreement,
  inventoryDifferences,
  type TestCase,
  type Verdict,
  VerdictError,
} from './judges/verdict.ts';
import { DEFAULT_LIMITS, type Limits, limitsFor } from './limits.ts';
import { addedPatterns, LINTS, TAMPER } from './lints.ts';
import { computeReward, DEFAULT_LINT_FACTOR } from './reward.ts';

export interface ScorerOptions {
  /** The confinement backend every run goes through. */
  confinement: Confinement;
  /** Where boxes are created (default: $TMPDIR/vtnode-boxes). */
  boxesDir?: string;
  /** Limits other than the wall time (which comes from each task's judge). */
  limits?: Partial<Limits>;
  /** Multiplier per added lint (default 0.9). */
  lintFactor?: number;
  /** Read-only package cache made visible to runs (default ~/.npm when not root, none as root). */
  packageCache?: string | null;
  /** Content id of a workspace (node/workspace/content-id.ts); called once per workspace and cached. */
  workspaceId: (dir: string) => Promise<string>;
}

export interface ScoreRequest {
  task: Task;
  /** The task's workspace: a built checkout holding the reference. */
  workspaceDir: string;
  /** The candidate's full text: a source file (`file` tasks) or a test file (`tests` tasks). */
  candidate: string;
  /** The generation stopped at its length limit. */
  truncated?: boolean;
  signal?: AbortSignal;
}

/** Summary of one confined run. */
export interface RunSummary {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  outputCapped: boolean;
  survivors: number;
  usage: RunResult['usage'];
}

export interface ScoreResult {
  taskId: string;
  reward: number;
  passRate: number;
  passed: number;
  failed: number;
  skipped: number;
  todo: number;
  /** Why the reward is what it is. */
  reasons: string[];
  /** Per-test results of the candidate run. */
  tests: TestCase[];
  lints: { name: string; added: number }[];
  tamper: { name: string; added: number }[];
  typecheck: 'passed' | 'failed' | 'not-configured' | 'not-run';
  /** Type-check output and the runner's stderr tail, for repair prompts. */
  diagnostics: string;
  /** Warnings that do not change the reward (workspace id differs from the task's, ...). */
  warnings: string[];
  fingerprint: string;
  backend: string;
  run: RunSummary | null;
  typecheckRun: RunSummary | null;
}

/** Scores candidates for tasks, one confined box per run. */
export interface Scorer {
  readonly confinement: Confinement;
  /** The backend's startup self-test (createCheckedScorer), for adverts; null when not run. */
  readonly selfTest: SelfTestResult | null;
  score(request: ScoreRequest): Promise<ScoreResult>;
  /** The evaluation fingerprint for a task in a workspace. */
  fingerprint(task: Task, workspaceDir: string): Promise<string>;
}

interface JudgeRun {
  run: RunResult;
  verdict: Verdict | null;
  failure: string | null;
}

interface Reference {
  content: string;
  cases: TestCase[];
  baselineCases: number | undefined;
  fingerprint: string;
  run: JudgeRun;
}

const TAIL = 4000;
const tail = (s: string) => (s.length > TAIL ? `…${s.slice(-TAIL)}` : s);

function summary(r: RunResult): RunSummary {
  return {
    exitCode: r.exitCode,
    signal: r.signal,
    timedOut: r.timedOut,
    outputCapped: r.outputCapped,
    survivors: r.survivors,
    usage: r.usage,
  };
}

/** The working directory of a task's test run inside `root` (a box or the workspace): judge.cwd or the root. */
export function runCwd(root: string, task: Task): string {
  return task.judge.cwd ? insideBox(root, task.judge.cwd) : root;
}

/** `npx tool …` runs the workspace's own bin (offline, no npm inside the box). */
export function resolveTypecheckArgv(argv: string[], box: string): string[] {
  let rest = argv;
  if (rest[0] === 'npx') {
    rest = rest.slice(1);
    while (rest[0]?.startsWith('-')) rest = rest.slice(1);
    if (rest[0] && !rest[0].includes('/'))
      rest = [join(box, 'node_modules', '.bin', rest[0]), ...rest.slice(1)];
  }
  if (rest.length === 0) throw new Error(`type-check argv ${JSON.stringify(argv)} names no program`);
  return rest;
}

/**
 * Creates a scorer over a confinement backend. The caller decides the backend (see backend.ts) and
 * should have run its self-test (createCheckedScorer does both).
 */
export function createScorer(options: ScorerOptions): Scorer {
  const { confinement } = options;
  const lintFactor = options.lintFactor ?? DEFAULT_LINT_FACTOR;
  const baseLimits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const node = process.execPath;
  const toolchainDir = dirname(dirname(node));
  const isRoot = process.getuid?.() === 0;
  const packageCache =
    options.packageCache === undefined ? (isRoot ? null : join(homedir(), '.npm')) : options.packageCache;
  const workspaceIds = new Map<string, Promise<string>>();
  const references = new Map<string, Promise<Reference>>();

  function workspaceId(dir: string): Promise<string> {
    let id = workspaceIds.get(dir);
    if (!id) {
      id = options.workspaceId(dir);
      workspaceIds.set(dir, id);
      id.catch(() => workspaceIds.delete(dir));
    }
    return id;
  }

  async function versionOf(box: string, pkg: string): Promise<string | null> {
    try {
      const text = await readFile(join(box, 'node_modules', pkg, 'package.json'), 'utf8');
      return `${pkg}@${(JSON.parse(text) as { version?: string }).version ?? 'unknown'}`;
    } catch {
      return null;
    }
  }

  async function fingerprintFor(task: Task, workspaceDir: string): Promise<string> {
    const judge = judgeFor(task.judge.runner);
    return evaluationFingerprint({
      backend: confinement.describe(),
      limits: limitsFor(task.judge.timeoutMs, baseLimits),
      workspaceId: await workspaceId(workspaceDir),
      node: process.version,
      tsc: await versionOf(workspaceDir, 'typescript'),
      runner: await judge.version(workspaceDir, runCwd(workspaceDir, task)).catch(() => 'unknown'),
      judge: task.judge,
      lintFactor,
    });
  }

  async function readOnlyFor(box: Box, judge: Judge | null): Promise<string[]> {
    const paths = [...box.linked, toolchainDir, ...(judge?.readOnlyPaths() ?? [])];
    if (packageCache) {
      const real = await realpath(packageCache).catch(() => null);
      if (real) paths.push(real);
    }
    return paths;
  }

  function envFor(box: string): Record<string, string> {
    return {
      PATH: `${join(box, 'node_modules', '.bin')}:${dirname(node)}:/usr/bin:/bin`,
      HOME: join(box, '.home'),
      TMPDIR: join(box, '.tmp'),
      LANG: 'C.UTF-8',
      CI: '1',
      NO_COLOR: '1',
      NODE_ENV: 'test',
    };
  }

  /** Runs the task's tests in a fresh box with `overlay` written over it, and parses the verdict. */
  async function runTests(
    task: Task,
    workspaceDir: string,
    overlay: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<JudgeRun> {
    const judge = judgeFor(task.judge.runner);
    const box = await createBox({
      workspace: workspaceDir,
      overlay,
      ...(options.boxesDir ? { boxesDir: options.boxesDir } : {}),
    });
    try {
      const reportDir = join(box.dir, '.vtnode');
      await mkdir(reportDir, { mode: 0o755 });
      const reportPath = join(reportDir, `report-${randomBytes(8).toString('hex')}.json`);
      const cwd = runCwd(box.dir, task);
      const argv = await judge.argv({ box: box.dir, cwd, node, reportPath }, task.judge.testFiles);
      const run = await confinement.run({
        argv,
        cwd,
        box: box.dir,
        readOnlyPaths: await readOnlyFor(box, judge),
        env: envFor(box.dir),
        limits: limitsFor(task.judge.timeoutMs, baseLimits),
        ...(signal ? { signal } : {}),
      });
      if (run.timedOut) return { run, verdict: null, failure: null };
      if (run.aborted) return { run, verdict: null, failure: 'the run was aborted' };
      if (run.outputCapped)
        return { run, verdict: null, failure: `the run printed more than ${baseLimits.outputBytes} bytes` };
      if (run.survivors > 0)
        return { run, verdict: null, failure: `${run.survivors} process(es) outlived the run` };
      try {
        const verdict = judge.parse(await readReport(reportPath), box.dir);
        return { run, verdict, failure: null };
      } catch (err) {
        if (err instanceof VerdictError) return { run, verdict: null, failure: err.message };
        throw err;
      }
    } finally {
      await box.dispose();
    }
  }

  async function runTypecheck(
    task: Task,
    workspaceDir: string,
    overlay: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<RunResult> {
    // A FRESH box: nothing the tests did can plant a verdict or change what tsc reads.
    const box = await createBox({
      workspace: workspaceDir,
      overlay,
      ...(options.boxesDir ? { boxesDir: options.boxesDir } : {}),
    });
    try {
      return await confinement.run({
        argv: resolveTypecheckArgv(task.judge.typecheck!, box.dir),
        cwd: box.dir,
        box: box.dir,
        readOnlyPaths: await readOnlyFor(box, null),
        env: envFor(box.dir),
        limits: limitsFor(Math.max(task.judge.timeoutMs, 120_000), baseLimits),
        ...(signal ? { signal } : {}),
      });
    } finally {
      await box.dispose();
    }
  }

  function reference(task: Task, workspaceDir: string, signal?: AbortSignal): Promise<Reference> {
    const key = `${workspaceDir}\0${task.id}`;
    let ref = references.get(key);
    if (!ref) {
      ref = (async () => {
        const content = await readFile(insideBox(workspaceDir, task.target), 'utf8').catch((err: Error) => {
          throw new Error(`task ${task.id}: cannot read the reference ${task.target} (${err.message})`);
        });
        const fp = await fingerprintFor(task, workspaceDir);
        const [run, baseline] = await Promise.all([
          runTests(task, workspaceDir, {}, signal),
          task.kind === 'tests' ? runTests(task, workspaceDir, { [task.target]: '' }, signal) : null,
        ]);
        const baselineCases =
          baseline?.verdict != null
            ? baseline.verdict.cases.filter((c) => c.status === 'passed' || c.status === 'failed').length
            : baseline
              ? 0
              : undefined;
        return { content, cases: run.verdict?.cases ?? [], baselineCases, fingerprint: fp, run };
      })();
      references.set(key, ref);
      // A reference run without a verdict (killed, timed out, aborted) is not kept: the next score retries.
      ref.then(
        (r) => {
          if (!r.run.verdict) references.delete(key);
        },
        () => references.delete(key),
      );
    }
    return ref;
  }

  return {
    confinement,
    selfTest: null,
    fingerprint: fingerprintFor,
    async score(req: ScoreRequest): Promise<ScoreResult> {
      const { task, candidate } = req;
      const workspaceDir = await realpath(req.workspaceDir);
      const warnings: string[] = [];
      const wsId = await workspaceId(workspaceDir);
      if (wsId !== task.workspace.id)
        warnings.push(
          `workspace ${workspaceDir} has content id ${wsId}, the task was mined from ${task.workspace.id}`,
        );
      const ref = await reference(task, workspaceDir, req.signal);
      const refReasons: string[] = [];
      if (`sha256:${sha256Hex(ref.content)}` !== task.referenceHash)
        refReasons.push(`the workspace's ${task.target} is not the task's reference (hash differs)`);
      if (!ref.run.verdict)
        refReasons.push(
          `the reference run gave no verdict: ${ref.run.failure ?? (ref.run.run.timedOut ? 'timed out' : 'unknown')}`,
        );
      const sameAsReference = candidate === ref.content;
      const cand = sameAsReference
        ? ref.run
        : await runTests(task, workspaceDir, { [task.target]: candidate }, req.signal);
      const verdict = cand.verdict;
      const counts = verdict ? countCases(verdict.cases) : { passed: 0, failed: 0, skipped: 0, todo: 0 };
      const verdictReasons: string[] = [...refReasons];
      if (verdict) {
        const disagreement = exitCodeDisagreement(verdict, cand.run.exitCode);
        if (disagreement) verdictReasons.push(disagreement);
        // Failures no test case carries (a file that did not load, an after hook): the run failed.
        if (verdict.errors.length > 0)
          verdictReasons.push(
            `the runner reported ${verdict.errors.length} error(s) outside any test case: ${verdict.errors[0]}`,
          );
        verdictReasons.push(
          ...inventoryDifferences(ref.cases, verdict.cases, task.kind === 'tests' ? [task.target] : []),
        );
      }
      const runFailures = cand.failure ? [cand.failure] : [];
      const tamper = addedPatterns(TAMPER, ref.content, candidate);
      const lints = addedPatterns(LINTS, ref.content, candidate);
      const candidateCases =
        task.kind === 'tests' && verdict
          ? verdict.cases.filter((c) => c.status === 'passed' || c.status === 'failed').length
          : undefined;
      const base = {
        kind: task.kind,
        truncated: req.truncated ?? false,
        timedOut: cand.run.timedOut,
        runFailures,
        verdictReasons,
        passed: counts.passed,
        failed: counts.failed,
        tamper,
        lints,
        lintFactor,
        ...(ref.baselineCases !== undefined ? { baselineCases: ref.baselineCases } : {}),
        ...(candidateCases !== undefined ? { candidateCases } : {}),
      };
      // The strict type-check runs only for a candidate that could still earn a positive reward.
      let typecheck: ScoreResult['typecheck'] = task.judge.typecheck ? 'not-run' : 'not-configured';
      let typecheckRun: RunResult | null = null;
      const diagnostics: string[] = [];
      if (typecheck === 'not-run' && computeReward({ ...base, typecheck: 'not-configured' }).reward > 0) {
        typecheckRun = await runTypecheck(task, workspaceDir, { [task.target]: candidate }, req.signal);
        const ok =
          typecheckRun.exitCode === 0 &&
          !typecheckRun.timedOut &&
          !typecheckRun.outputCapped &&
          typecheckRun.survivors === 0;
        typecheck = ok ? 'passed' : 'failed';
        if (!ok) diagnostics.push(tail(`${typecheckRun.stdout}${typecheckRun.stderr}`));
      }
      if (cand.failure || (verdict && counts.failed + verdict.errors.length > 0) || cand.run.timedOut)
        diagnostics.push(tail(cand.run.stderr));
      if (verdict) for (const e of verdict.errors) diagnostics.push(e);
      const result = computeReward({ ...base, typecheck });
      return {
        taskId: task.id,
        reward: result.reward,
        passRate: result.passRate,
        ...counts,
        reasons: result.reasons,
        tests: verdict?.cases ?? [],
        lints,
        tamper,
        typecheck,
        diagnostics: diagnostics.filter(Boolean).join('\n'),
        warnings,
        fingerprint: ref.fingerprint,
        backend: confinement.name,
        run: summary(cand.run),
        typecheckRun: typecheckRun ? summary(typecheckRun) : null,
      };
    },
  };
}

/** Creates the backend, runs its self-test and refuses (throws) when it fails. */
export async function createCheckedScorer(
  options: Omit<ScorerOptions, 'confinement'> & {
    unconfined?: boolean;
    maxConcurrent?: number;
    signal?: AbortSignal;
  },
): Promise<Scorer> {
  const { createConfinement } = await import('./backend.ts');
  const confinement = await createConfinement({
    ...(options.unconfined ? { unconfined: true } : {}),
    ...(options.maxConcurrent !== undefined ? { maxConcurrent: options.maxConcurrent } : {}),
  });
  await sweepStaleBoxes(options.boxesDir);
  const test = await confinement.selfTest(options.signal);
  if (!test.ok) {
    const failed = test.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    throw new SandboxSelfTestError(
      `the ${confinement.name} sandbox failed its self-test: ${failed.join('; ')}`,
    );
  }
  return { ...createScorer({ ...options, confinement }), selfTest: test };
}

export class SandboxSelfTestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxSelfTestError';
  }
}
