import { readFile, realpath } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { canonicalJson, sha256Hex } from '../protocol/canonical.ts';
import type { Task } from '../protocol/task.ts';
import { VTNODE_VERSION } from '../protocol/version.ts';
import { boxCwd, createBox, insideBox, sweepStaleBoxes } from './box.ts';
import { type ReferenceCache, referenceKey, type SelfTestCache, type StoredReference } from './cache.ts';
import type { Confinement, RunResult, SelfTestResult } from './confinement.ts';
import { evaluationFingerprint, SCORER_VERSION } from './fingerprint.ts';
import { INTEGRITY_DIGEST } from './integrity/rewrite.ts';
import { sentinelProblems } from './integrity/sentinel.ts';
import { createJudgeRunner, type JudgeRun, TIMEOUT_REASON } from './judge-run.ts';
import { judgeFor } from './judges/index.ts';
import { packageVersion } from './judges/package.ts';
import { countCases, inventoryDifferences, type TestCase } from './judges/verdict.ts';
import { DEFAULT_LIMITS, type Limits, limitsFor } from './limits.ts';
import { addedPatterns, LINTS } from './lints.ts';
import { logger } from './log.ts';
import type { OverrunVerdict, ReferenceTime } from './overrun.ts';
import { formatDifference } from './replay/compare.ts';
import { createReplayJudge, REPLAY_DIGEST, type ReplayKey, replayReason } from './replay/judge.ts';
import { computeReward, DEFAULT_LINT_FACTOR, type RewardInput } from './reward.ts';
import { createStrengthJudge, type StrengthKey } from './strength.ts';
import { addedTamper } from './tamper.ts';
import {
  createTypecheckStage,
  type ServiceCheckSummary,
  type TypecheckStageOptions,
} from './typecheck/stage.ts';

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
  /** How often a run that failed for infrastructure reasons is tried again before giving up (default 1). */
  infraRetries?: number;
  /** Reference runs and self-tests kept across processes (e.g. in the data dir); none by default. */
  cache?: { references: ReferenceCache; selfTest?: SelfTestCache };
  /**
   * Type-check candidates with the warm type-check service (default true; same verdicts as a fresh tsc,
   * plus the exported-API comparison); false runs a fresh tsc per candidate.
   */
  typecheckService?: boolean;
  /** Budgets of the type-check services (CPU per check, start, wall factor). */
  typecheckServiceOptions?: TypecheckStageOptions['serviceOptions'];
  /**
   * Differential replay of `file` tasks (default true): the reference's calls recorded at calibration,
   * replayed against each candidate in a box without test files, compared on the host (sandbox/replay/).
   */
  replay?: boolean;
}

/** The differential replay of a candidate (file tasks), beside the test run's verdict. */
export interface ReplaySummary {
  /** Whether the task's calls replay (its answer key holds at least one call). */
  replayable: boolean;
  /** Why the task is not replayable, or null. */
  why: string | null;
  /** Calls the tests made into the reference, and those that replay (coverage: kept ÷ recorded). */
  recorded: number;
  kept: number;
  /** Where the task's candidates are replayed; for a replayed candidate, where its verdict came from. */
  mode: 'node' | 'vitest';
  /** Calls compared for this candidate (those of the tests it passed); null when it was not replayed. */
  compared: number | null;
  /** Of them, those whose outputs differ from the reference's; null when it was not replayed. */
  differing: number | null;
  /** The first differences, by name. */
  differences: string[];
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
  cpuExceeded: boolean;
  limitExceeded: string | null;
  outputCapped: boolean;
  survivors: number;
  usage: RunResult['usage'];
  /** The hang rule's verdict on a timed-out run (sandbox/overrun.ts), else null. */
  overrun: OverrunVerdict | null;
}

export interface ScoreResult {
  taskId: string;
  /**
   * `scored`: the reward is the candidate's. `timeout`: scored too, reward 0: the candidate's run did not
   * finish while the host had CPU to give it (the hang rule, sandbox/overrun.ts; the first reason begins
   * with `timeout:`). `error`: scoring failed for infrastructure reasons (a box that could not be set
   * up, a run starved of CPU by a loaded host, a type-check stopped by its wall-clock limit, a reference
   * that could not run); `reward` is null and the sample must be retried or stored unscored — never as
   * a 0.
   */
  status: 'scored' | 'timeout' | 'error';
  /** Why scoring failed (status `error`), else null. */
  error: string | null;
  /** In [0, 1]; null when status is `error`. */
  reward: number | null;
  passRate: number;
  passed: number;
  failed: number;
  skipped: number;
  todo: number;
  /** Why the reward is what it is. */
  reasons: string[];
  /** Per-test results of the candidate run (the integrity sentinels left out). */
  tests: TestCase[];
  lints: { name: string; added: number }[];
  tamper: { name: string; added: number; examples: string[] }[];
  typecheck: 'passed' | 'failed' | 'timeout' | 'not-configured' | 'not-run';
  /** Type-check output and the runner's stderr tail, for repair prompts. */
  diagnostics: string;
  /** Warnings that do not change the reward (workspace id differs from the task's, ...). */
  warnings: string[];
  fingerprint: string;
  backend: string;
  run: RunSummary | null;
  /** The fresh tsc run, when the type-check ran as one. */
  typecheckRun: RunSummary | null;
  /** The type-check service's answer, when it checked. */
  typecheckService: ServiceCheckSummary | null;
  /** The differential replay (file tasks with the replay on), else null or absent. */
  replay?: ReplaySummary | null;
}

/** Scores candidates for tasks, one confined box per run. */
export interface Scorer {
  readonly confinement: Confinement;
  /** The backend's startup self-test (createCheckedScorer), for adverts; null when not run. */
  readonly selfTest: SelfTestResult | null;
  score(request: ScoreRequest): Promise<ScoreResult>;
  /** The evaluation fingerprint for a task in a workspace. */
  fingerprint(task: Task, workspaceDir: string): Promise<string>;
  /** Stops the scorer's long-lived processes (type-check services); later scores start them again. */
  close(): Promise<void>;
}

/** What scoring a task needs from its reference: computed once per task and workspace. */
interface Reference {
  content: string;
  fingerprint: string;
  run: JudgeRun;
  /** `tests` tasks: the mutants the original tests kill and the functions they enter. */
  strength: StrengthKey | undefined;
  /** The reference run's own time: the hang rule's yardstick for candidates (null: no rule). */
  time: ReferenceTime | null;
  /** Why the reference cannot judge candidates (the task is broken): every score is 0 with these. */
  problems: string[];
  /** `file` tasks with the replay on: the replay's answer key (or why the task is not replayable). */
  replay: ReplayKey | undefined;
}

function replaySummary(key: ReplayKey): ReplaySummary {
  return {
    replayable: key.replayable,
    why: key.why,
    recorded: key.recorded,
    kept: key.kept,
    mode: key.mode,
    compared: null,
    differing: null,
    differences: [],
  };
}

const log = logger('vtnode:sandbox:scorer');
const TAIL = 4000;
const tail = (s: string) => (s.length > TAIL ? `…${s.slice(-TAIL)}` : s);

function summary(r: RunResult): RunSummary {
  return {
    exitCode: r.exitCode,
    signal: r.signal,
    timedOut: r.timedOut,
    cpuExceeded: r.cpuExceeded ?? false,
    limitExceeded: r.limitExceeded ?? null,
    outputCapped: r.outputCapped,
    survivors: r.survivors,
    usage: r.usage,
    overrun: r.overrun ?? null,
  };
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

/** Why a reference run cannot serve as the answer key, besides an infrastructure failure. */
function referenceProblems(task: Task, content: string, run: JudgeRun): string[] {
  const out: string[] = [];
  if (`sha256:${sha256Hex(content)}` !== task.referenceHash)
    out.push(`the workspace's ${task.target} is not the task's reference (hash differs)`);
  if (!run.verdict) out.push(`the reference run gave no verdict: ${run.failure ?? 'unknown'}`);
  if (run.exitDisagreement) out.push(`the reference run: ${run.exitDisagreement}`);
  for (const [file, reading] of run.sentinels)
    for (const p of sentinelProblems(file, reading, undefined)) out.push(`the reference run: ${p}`);
  return out;
}

/** Reasons the candidate's verdict cannot be believed, judged against the reference run. */
function verdictReasons(task: Task, ref: Reference, cand: JudgeRun): string[] {
  const out = [...ref.problems];
  if (!cand.verdict) return out;
  if (cand.exitDisagreement) out.push(cand.exitDisagreement);
  // Failures no test case carries (a file that did not load, an after hook): the run failed.
  if (cand.verdict.errors.length > 0)
    out.push(
      `the runner reported ${cand.verdict.errors.length} error(s) outside any test case: ${cand.verdict.errors[0]}`,
    );
  for (const [file, reading] of cand.sentinels)
    out.push(...sentinelProblems(file, reading, ref.run.sentinels.get(file)));
  const refCases = ref.run.verdict?.cases ?? [];
  out.push(...inventoryDifferences(refCases, cand.verdict.cases, task.kind === 'tests' ? [task.target] : []));
  return out;
}

/** Could the candidate still earn a positive reward, given what is known before its costly stages? */
function couldEarn(input: RewardInput): boolean {
  const optimistic = { killed: 1, of: 1, covered: 1, ofCovered: 1 };
  return (
    computeReward({ ...input, strength: input.strength ?? optimistic, typecheck: 'not-configured' }).reward >
    0
  );
}

/** The serialisable part of a reference, for the cache. */
function toStored(ref: Reference): StoredReference {
  return {
    v: 3,
    contentHash: sha256Hex(ref.content),
    verdict: ref.run.verdict,
    sentinels: [...ref.run.sentinels],
    exitDisagreement: ref.run.exitDisagreement,
    failure: ref.run.failure,
    time: ref.time,
    ...(ref.strength ? { strength: ref.strength } : {}),
    ...(ref.replay ? { replay: ref.replay } : {}),
  };
}

/** A reference rebuilt from the cache: its verdict and sentinels, without the process that made them. */
function fromStored(task: Task, content: string, fingerprint: string, s: StoredReference): Reference {
  const run: JudgeRun = {
    run: null,
    verdict: s.verdict,
    sentinels: new Map(s.sentinels),
    exitDisagreement: s.exitDisagreement,
    failure: s.failure,
    infra: null,
    collected: new Map(),
  };
  return {
    content,
    fingerprint,
    run,
    strength: s.strength,
    time: s.time,
    problems: referenceProblems(task, content, run),
    replay: s.replay,
  };
}

/** Fingerprints a scorer keeps (per workspace dir and judge) before it forgets them all. */
const MAX_FINGERPRINTS = 1000;

/**
 * Creates a scorer over a confinement backend. The caller decides the backend (see backend.ts) and
 * should have run its self-test (createCheckedScorer does both).
 */
export function createScorer(options: ScorerOptions): Scorer {
  const { confinement } = options;
  const lintFactor = options.lintFactor ?? DEFAULT_LINT_FACTOR;
  const baseLimits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const infraRetries = options.infraRetries ?? 1;
  const isRoot = process.getuid?.() === 0;
  const packageCache =
    options.packageCache === undefined ? (isRoot ? null : join(homedir(), '.npm')) : options.packageCache;
  const judges = createJudgeRunner({
    confinement,
    baseLimits,
    packageCache,
    ...(options.boxesDir ? { boxesDir: options.boxesDir } : {}),
  });
  const strength = createStrengthJudge(judges);
  const replays = createReplayJudge(judges);
  const replayOn = options.replay !== false;
  /** Whether a task's reference must carry a replay key (made by this version of the replay). */
  const wantsReplay = (task: Task) => replayOn && task.kind === 'file';
  const typechecks = createTypecheckStage({
    confinement,
    fresh: runTypecheck,
    ...(options.typecheckService === false ? { service: false } : {}),
    ...(options.typecheckServiceOptions ? { serviceOptions: options.typecheckServiceOptions } : {}),
  });
  const workspaceIds = new Map<string, Promise<string>>();
  const references = new Map<string, Promise<Reference | { infra: string }>>();
  const fingerprints = new Map<string, Promise<string>>();

  function workspaceId(dir: string): Promise<string> {
    let id = workspaceIds.get(dir);
    if (!id) {
      id = options.workspaceId(dir);
      workspaceIds.set(dir, id);
      id.catch(() => workspaceIds.delete(dir));
    }
    return id;
  }

  /**
   * The evaluation fingerprint, kept per workspace dir and judge: its parts are fixed for a dir as its
   * id is (workspaceId), and reading them again costs file reads for every sample scored.
   */
  function fingerprintFor(task: Task, workspaceDir: string): Promise<string> {
    const key = canonicalJson([workspaceDir, task.judge]);
    let fp = fingerprints.get(key);
    if (!fp) {
      if (fingerprints.size >= MAX_FINGERPRINTS) fingerprints.clear();
      const forget = () => fingerprints.delete(key);
      fp = computeFingerprint(task, workspaceDir, forget);
      fingerprints.set(key, fp);
      fp.catch(forget);
    }
    return fp;
  }

  /** Computes a fingerprint; `unsure` is called when a part could not be read (it is not kept then). */
  async function computeFingerprint(task: Task, workspaceDir: string, unsure: () => void): Promise<string> {
    const judge = judgeFor(task.judge.runner);
    return evaluationFingerprint({
      backend: confinement.describe(),
      limits: limitsFor(task.judge.timeoutMs, baseLimits),
      workspaceId: await workspaceId(workspaceDir),
      node: process.version,
      tsc: await packageVersion(workspaceDir, 'typescript'),
      runner: await judge.version(workspaceDir, boxCwd({ dir: workspaceDir }, task.judge.cwd)).catch(() => {
        unsure();
        return 'unknown';
      }),
      judge: task.judge,
      lintFactor,
      integrity: INTEGRITY_DIGEST,
    });
  }

  /** A judged run, tried again when it failed for infrastructure reasons. */
  async function judged(
    task: Task,
    workspaceDir: string,
    overlay: Record<string, string>,
    signal?: AbortSignal,
    reference?: ReferenceTime | null,
  ): Promise<JudgeRun> {
    const request = {
      task,
      workspaceDir,
      overlay,
      ...(signal ? { signal } : {}),
      ...(reference ? { reference } : {}),
    };
    let run = await judges.run(request);
    for (let i = 0; i < infraRetries && run.infra && !signal?.aborted; i++) run = await judges.run(request);
    return run;
  }

  async function computeReference(
    task: Task,
    workspaceDir: string,
    signal?: AbortSignal,
  ): Promise<Reference | { infra: string }> {
    const content = await readFile(insideBox(workspaceDir, task.target), 'utf8').catch((err: Error) => {
      throw new Error(`task ${task.id}: cannot read the reference ${task.target} (${err.message})`);
    });
    const fp = await fingerprintFor(task, workspaceDir);
    const key = referenceKey(fp, task.id, task.referenceHash, task.kind);
    const stored = await options.cache?.references.get(key);
    const storedKeyFits = !wantsReplay(task) || stored?.replay?.digest === REPLAY_DIGEST;
    if (stored && stored.contentHash === sha256Hex(content) && storedKeyFits)
      return fromStored(task, content, fp, stored);
    const ref = await runReference(task, workspaceDir, content, fp, signal);
    // Only a good reference is kept: a broken or flaky one is run again next time.
    if (!('infra' in ref) && ref.problems.length === 0 && !task.judge.flaky)
      await options.cache?.references
        .put(key, toStored(ref))
        .catch((err: Error) => log.warn(`cannot write the reference cache: ${err.message}`));
    return ref;
  }

  async function runReference(
    task: Task,
    workspaceDir: string,
    content: string,
    fp: string,
    signal?: AbortSignal,
  ): Promise<Reference | { infra: string }> {
    const running = judged(task, workspaceDir, {}, signal);
    // The replay's recording runs beside the reference's own run; it is kept only for a reference that
    // passes its tests (else there is no answer key).
    const [run, key, recorded] = await Promise.all([
      running,
      task.kind === 'tests' ? strength.key(task, workspaceDir, signal) : null,
      wantsReplay(task) ? replays.record(task, workspaceDir, content, running, signal) : undefined,
    ]);
    const infra = run.infra ?? (key && 'infra' in key ? key.infra : null);
    if (infra) return { infra: `the reference could not be run: ${infra}` };
    const problems = referenceProblems(task, content, run);
    if (key && 'problem' in key) problems.push(key.problem);
    const strengthKey = key && 'key' in key ? key.key : undefined;
    const time = run.run ? { wallMs: run.run.usage.wallMs, cpuMs: run.run.usage.cpuMs } : null;
    let replay: ReplayKey | undefined;
    if (recorded && problems.length === 0) {
      if ('infra' in recorded)
        return { infra: `the reference's replay could not be recorded: ${recorded.infra}` };
      replay = recorded;
    }
    return { content, fingerprint: fp, run, strength: strengthKey, time, problems, replay };
  }

  function reference(task: Task, workspaceDir: string, signal?: AbortSignal) {
    const key = `${workspaceDir}\0${task.id}\0${task.referenceHash}`;
    let ref = references.get(key);
    if (!ref) {
      ref = computeReference(task, workspaceDir, signal);
      references.set(key, ref);
      // A reference that could not run is not kept: the next score tries again.
      ref.then(
        (r) => {
          if ('infra' in r) references.delete(key);
        },
        () => references.delete(key),
      );
    }
    return ref;
  }

  /** A tests candidate's strength against the reference's key, as reward input (or an infra error). */
  async function strengthStage(
    task: Task,
    workspaceDir: string,
    candidate: string,
    ref: Reference,
    signal?: AbortSignal,
  ): Promise<Pick<RewardInput, 'strength' | 'verdictReasons'> | { infra: string }> {
    if (!ref.strength)
      return { strength: { killed: 0, of: 0, covered: 0, ofCovered: 0 }, verdictReasons: [] };
    // The original test file is its own answer key: no second mutation run.
    if (candidate === ref.content) {
      const { killed, covered } = ref.strength;
      const all = {
        killed: killed.length,
        of: killed.length,
        covered: covered.length,
        ofCovered: covered.length,
      };
      return { strength: all, verdictReasons: [] };
    }
    const s = await strength.measure(task, workspaceDir, candidate, ref.strength, signal);
    if ('infra' in s) return { infra: `the mutation run could not judge: ${s.infra}` };
    return {
      strength: { killed: s.killed, of: s.of, covered: s.covered, ofCovered: s.ofCovered },
      verdictReasons: s.problems.map((p) => (p.startsWith('tamper:') ? p : `mutation run: ${p}`)),
    };
  }

  async function runTypecheck(task: Task, workspaceDir: string, candidate: string, signal?: AbortSignal) {
    // A FRESH box without the harness: nothing the tests did can plant a verdict or change what tsc reads.
    const box = await createBox({
      workspace: workspaceDir,
      overlay: { [task.target]: candidate },
      ...(options.boxesDir ? { boxesDir: options.boxesDir } : {}),
    });
    try {
      return await confinement.run({
        argv: resolveTypecheckArgv(task.judge.typecheck!, box.dir),
        cwd: box.dir,
        box: box.dir,
        readOnlyPaths: await judges.readOnlyFor(box, null),
        env: judges.envFor(box.dir),
        limits: limitsFor(Math.max(task.judge.timeoutMs, 120_000), baseLimits),
        ...(signal ? { signal } : {}),
      });
    } finally {
      await box.dispose();
    }
  }

  function errorResult(
    task: Task,
    error: string,
    warnings: string[],
    fp: string,
    run: RunResult | null,
  ): ScoreResult {
    return {
      taskId: task.id,
      status: 'error',
      error,
      reward: null,
      passRate: 0,
      passed: 0,
      failed: 0,
      skipped: 0,
      todo: 0,
      reasons: [error],
      tests: [],
      lints: [],
      tamper: [],
      typecheck: 'not-run',
      diagnostics: run ? tail(run.stderr) : '',
      warnings,
      fingerprint: fp,
      backend: confinement.name,
      run: run ? summary(run) : null,
      typecheckRun: null,
      typecheckService: null,
      replay: null,
    };
  }

  return {
    confinement,
    selfTest: null,
    fingerprint: fingerprintFor,
    close: () => typechecks.close(),
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
      if ('infra' in ref)
        return errorResult(task, ref.infra, warnings, await fingerprintFor(task, workspaceDir), null);
      // An answer key that fails here (an unreadable or unbuilt workspace, another checkout, a runner
      // that cannot start) judges nothing: a candidate's score would be this node's fault, so it is an
      // error to retry elsewhere, never a 0. Only the reference itself (calibration) is scored on it.
      if (ref.problems.length > 0 && candidate !== ref.content)
        return errorResult(
          task,
          `the reference does not pass on this node, so no candidate can be judged here: ${ref.problems.join('; ')}`,
          warnings,
          ref.fingerprint,
          ref.run.run,
        );
      const cand =
        candidate === ref.content
          ? ref.run
          : await judged(task, workspaceDir, { [task.target]: candidate }, req.signal, ref.time);
      if (cand.infra) return errorResult(task, cand.infra, warnings, ref.fingerprint, cand.run);
      const verdict = cand.verdict;
      // A tests candidate is judged on its own cases (the other judged files are the inventory check).
      const own = verdict ? verdict.cases.filter((c) => task.kind === 'file' || c.file === task.target) : [];
      const counts = countCases(own);
      const tamper = addedTamper(
        ref.content,
        candidate,
        task.target,
        task.kind === 'tests' ? 'tests' : 'source',
      );
      const lints = addedPatterns(LINTS, ref.content, candidate);
      let input: RewardInput = {
        kind: task.kind,
        truncated: req.truncated ?? false,
        runFailures: cand.failure ? [cand.failure] : [],
        verdictReasons: verdictReasons(task, ref, cand),
        passed: counts.passed,
        failed: counts.failed,
        tamper,
        lints,
        lintFactor,
        typecheck: 'not-configured',
      };
      // The second verdict, out of the candidate's reach: its outputs on the recorded calls, compared here.
      let replay: ReplaySummary | null = ref.replay ? replaySummary(ref.replay) : null;
      if (ref.replay?.replayable && replay && verdict && candidate !== ref.content && couldEarn(input)) {
        const replayed = await replays.replay(task, workspaceDir, candidate, ref.replay, own, req.signal);
        if ('infra' in replayed)
          return errorResult(task, replayed.infra, warnings, ref.fingerprint, cand.run);
        replay = {
          ...replay,
          mode: replayed.mode,
          compared: replayed.compared,
          differing: replayed.differences.length,
          differences: replayed.differences.slice(0, 10).map(formatDifference),
        };
        const why = replayReason(replayed);
        if (why) input = { ...input, verdictReasons: [...input.verdictReasons, why] };
      }
      // The costly stages run only for a candidate that could still earn a positive reward.
      if (task.kind === 'tests' && couldEarn(input)) {
        const measured = await strengthStage(task, workspaceDir, candidate, ref, req.signal);
        if ('infra' in measured)
          return errorResult(task, measured.infra, warnings, ref.fingerprint, cand.run);
        input = {
          ...input,
          ...(measured.strength ? { strength: measured.strength } : {}),
          verdictReasons: [...input.verdictReasons, ...(measured.verdictReasons ?? [])],
        };
      }
      const diagnostics: string[] = [];
      let typecheck: ScoreResult['typecheck'] = task.judge.typecheck ? 'not-run' : 'not-configured';
      let checked: Awaited<ReturnType<typeof typechecks.check>> | null = null;
      if (typecheck === 'not-run' && computeReward({ ...input, typecheck: 'not-configured' }).reward > 0) {
        // A service that died or hit its wall backstop starts again at the next check: try again.
        for (let attempt = 0; attempt <= infraRetries && (checked === null || 'infra' in checked); attempt++)
          checked = await typechecks.check({
            task,
            workspaceDir,
            workspaceId: wsId,
            candidate,
            ...(req.signal ? { signal: req.signal } : {}),
          });
        checked = checked!;
        if ('infra' in checked)
          return {
            ...errorResult(task, checked.infra, warnings, ref.fingerprint, checked.run),
            typecheckService: checked.service,
          };
        typecheck = checked.typecheck;
        if (checked.diagnostics) diagnostics.push(checked.diagnostics);
        input = { ...input, apiDifferences: checked.apiDifferences };
      }
      if (cand.failure || (verdict && counts.failed + verdict.errors.length > 0))
        diagnostics.push(tail(cand.run?.stderr ?? ''));
      if (verdict) for (const e of verdict.errors) diagnostics.push(e);
      const result = computeReward({ ...input, typecheck });
      const timedOut = cand.run?.overrun?.verdict === 'timeout' && cand.failure?.startsWith(TIMEOUT_REASON);
      return {
        taskId: task.id,
        status: timedOut ? 'timeout' : 'scored',
        error: null,
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
        run: cand.run ? summary(cand.run) : null,
        typecheckRun: checked?.run ? summary(checked.run) : null,
        typecheckService: checked?.service ?? null,
        replay,
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
  const test = await selfTested(confinement, options.cache?.selfTest, options.signal);
  if (!test.ok) {
    const failed = test.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    throw new SandboxSelfTestError(
      `the ${confinement.name} sandbox failed its self-test: ${failed.join('; ')}`,
    );
  }
  return { ...createScorer({ ...options, confinement }), selfTest: test };
}

/** The backend's self-test, or a passed one of the same backend from the cache (one-shot commands). */
async function selfTested(confinement: Confinement, cache: SelfTestCache | undefined, signal?: AbortSignal) {
  const backend = { ...confinement.describe(), vtnode: VTNODE_VERSION, scorer: SCORER_VERSION };
  const cached = await cache?.get(backend);
  if (cached) return { ok: true, checks: cached, cached: true };
  const test = await confinement.selfTest(signal);
  if (test.ok) await cache?.put(backend, test.checks).catch(() => undefined);
  return test;
}

export class SandboxSelfTestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxSelfTestError';
  }
}
