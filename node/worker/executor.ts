import { setTimeout as afterIo } from 'node:timers/promises';
import {
  DEFAULT_JOB_LEASE_MS,
  type JobRequest,
  MAX_JOB_FRAME_BYTES,
  type RefusalReason,
  type SampleResult,
  SCORING_BEAT_MS,
  SubmitterMessage,
  sampleId,
  sampleSeed,
  type WorkerLoad,
  WorkerMessage,
} from '../../protocol/job.ts';
import { type SampleBody, sampleResultOf } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
import { JOB_PROTOCOL } from '../../protocol/topics.ts';
import type { ScoreResult, Scorer } from '../../sandbox/scorer.ts';
import { createSemaphore, limiter, type Semaphore } from '../async/semaphore.ts';
import { type Logger, logger } from '../logger.ts';
import { metrics, verdictOf } from '../metrics.ts';
import type { Sample } from '../models/adapter.ts';
import type { ModelService } from '../models/service.ts';
import type { Framed } from '../wire/framed.ts';
import { localPair } from '../wire/local.ts';
import { handleFramed, type StreamHost } from '../wire/streams.ts';
import { jobAcceptedLine, jobFinishedLine, sampleLine } from './info-lines.ts';
import { type AdmissionState, adoptable, reattachRefusal, refusal } from './job-admission.ts';
import { failureReason, type JobError, jobError } from './job-error.ts';
import {
  type JobActivity,
  type JobLoad,
  jobLoad,
  newActivity,
  queueForScoring,
  type ScoringTicket,
} from './job-load.ts';
import { createJobRun, type JobFailureEnd, type JobRun } from './job-run.ts';
import {
  candidateOf,
  generatedMessage,
  generateRequest,
  sampleBody,
  sandboxScore,
  unscorableReason,
  unscorableScore,
} from './job-samples.ts';
import type { LoggedSample, SampleLog } from './sample-log.ts';

/** Whether the node can log samples durably (a full disk, a broken sample log stop it). */
export interface StorageHealth {
  /** Why samples cannot be logged now, or null when they can. */
  blocked(): string | null;
  /** Reports a failed write of `path`: true when it was a storage fault (the health then says so). */
  failed(err: unknown, path: string): boolean;
}

/** Workspaces being fetched, as the executor sees them. */
export interface FetchingWorkspaces {
  /** True while workspace `id` is being fetched, installed or calibrated. */
  has(id: string): boolean;
  /** Its directory once ready; rejects when its fetch, install or calibration fails, or `signal` fires. */
  whenReady(id: string, signal: AbortSignal): Promise<string>;
}

export interface JobExecutorOptions {
  /** The libp2p host whose /vtnode/job/1 streams this executor serves. */
  host: StreamHost;
  /** Interval of `scoring` heartbeats while a job's samples are in the sandbox, ms (default SCORING_BEAT_MS). */
  scoringBeatMs?: number;
  /** This node's peer id (the origin of its samples). */
  peerId: string;
  /** Model servers that generate the samples. */
  models: ModelService;
  /** The sandbox scorer, or null when the node cannot score (it then refuses every job). */
  scorer: Scorer | null;
  /** Workspaces held by this node: content id → directory. */
  workspaces: ReadonlyMap<string, string>;
  /**
   * Workspaces this node is fetching (--fetch-workspaces; the acquirer, node/workspace/acquire.ts).
   * Jobs for them are taken: they generate at once, and their samples are scored once it is ready.
   */
  fetching?: FetchingWorkspaces;
  /** Durable sample log: every sample is appended before it is reported. */
  sampleLog: SampleLog;
  /** Storage health: while blocked, jobs are refused and no capacity is advertised (default: always fine). */
  storage?: StorageHealth;
  /**
   * Jobs generating at once (the job slots); more are refused as `full`. A job whose samples are all
   * generated frees its slot while it scores, and up to `maxJobs` such jobs are kept besides.
   */
  maxJobs: number;
  /**
   * Why the node takes no new jobs now (a guest on battery or under load), or null (default: never):
   * new jobs are refused as `full` and no capacity is advertised; running jobs go on.
   */
  paused?: () => string | null;
  /** Candidates scored at once across all jobs (scoring is CPU-bound). */
  maxScoring?: number;
  /** Called when the number of running jobs changes (the advert's load). */
  onLoadChange?: () => void;
  /** Called after each sample is durable (digest gossip hooks in here). */
  onSample?: (sample: LoggedSample) => void;
  /** Info lines per job and per verified sample (default true; false: at debug level only). */
  jobLines?: boolean;
}

export interface JobExecutor {
  start(): Promise<void>;
  /** A job stream to this node's own executor (a node runs jobs on itself without dialling). */
  local(): Framed<WorkerMessage, SubmitterMessage>;
  load(): JobLoad;
  /** Jobs accepted (started) since the executor started. */
  accepted(): number;
  /** Content ids of the workspaces the running jobs score against. */
  workspacesInUse(): string[];
  /** Aborts running jobs (their submitters re-place the rest) and stops accepting new ones. */
  stop(): Promise<void>;
}

type Wire = Framed<SubmitterMessage, WorkerMessage>;

/** One admitted job's work, as the steps that run it see it. */
interface JobWork {
  job: JobRequest;
  run: JobRun;
  abort: AbortController;
  /** Generating, scoring or waiting for a scoring slot: the advert's queued/running split. */
  activity: JobActivity;
}

/** A job this node is running, with the submitter it belongs to. */
interface Running extends JobWork {
  submitter: string;
  /** Settles once the job is over and its end is sent (stop waits for it before the log closes). */
  over: Promise<void>;
}

/** The executor's state, shared by its steps. */
interface Executor {
  options: JobExecutorOptions;
  log: Logger;
  /** Where the per-job and per-sample info lines go (at debug level when options.jobLines is false). */
  info: (message: string, ...args: unknown[]) => void;
  /** Scoring slots, shared by every job (scoring is CPU-bound). */
  scoring: ReturnType<typeof limiter>;
  /** Job slots (generation), taken in admission order; released once a job's samples are all generated. */
  slots: Semaphore;
  /** Running jobs by job id. */
  running: Map<string, Running>;
  /** stop() was called: new jobs are refused. */
  stopped: boolean;
  /** Jobs accepted (started) since the executor started. */
  accepted: number;
}

/** One pass over a job's samples missing from the log: what its generation and scorings share. */
interface Pass {
  /** The samples to produce, in request order (outcome i is sample todo[i]). */
  todo: number[];
  /** Scorings started (each settles, never rejects). */
  pending: Promise<void>[];
  /** Generated samples not yet scored (waiting for a sandbox slot or running): heartbeats name them. */
  inSandbox: Set<number>;
  /** The first failure that ends the job, if any. */
  failure: { reason: JobFailureEnd['reason']; message: string } | null;
}

/** How long stop() waits for aborted jobs to wind down, ms. */
const STOP_WAIT_MS = 10_000;

/**
 * The worker side of /vtnode/job/1: accepts or refuses a job, generates its samples on the node's
 * model servers (warm, then fan out), scores each one in the sandbox as soon as it is generated
 * (generation and scoring overlap), appends it durably to the sample log, then reports it.
 * Samples already in the log (a re-placed job, a restarted submitter) are reported from the log,
 * not generated again. A job outlives its stream (node/worker/job-run.ts): a broken stream leaves it
 * running for the request's `leaseMs`, and a `job` naming a running job re-attaches to it.
 */
export function createJobExecutor(options: JobExecutorOptions): JobExecutor {
  const x = newExecutor(options);
  return {
    start: () => serveStreams(x),
    local: () => localStream(x),
    load: () => advertisedLoad(x),
    accepted: () => x.accepted,
    workspacesInUse: () => [...new Set([...x.running.values()].map((r) => r.job.task.workspace.id))],
    stop: () => stopExecutor(x),
  };
}

/** A fresh executor: no job running, nothing accepted yet. */
function newExecutor(options: JobExecutorOptions): Executor {
  const log = logger('vtnode:worker:executor');
  return {
    options,
    log,
    info: options.jobLines === false ? log : log.info,
    scoring: limiter(options.maxScoring ?? 2),
    slots: createSemaphore(Math.max(1, options.maxJobs)),
    running: new Map(),
    stopped: false,
    accepted: 0,
  };
}

/** Serves /vtnode/job/1 on the host. */
async function serveStreams(x: Executor): Promise<void> {
  await handleFramed<typeof SubmitterMessage, WorkerMessage>(
    x.options.host,
    JOB_PROTOCOL,
    (wire, connection) => serve(x, wire, connection.remotePeer.toString()),
    {
      schema: SubmitterMessage,
      maxFrameBytes: MAX_JOB_FRAME_BYTES,
    },
  );
}

/** A job stream to this node's own executor, served like a remote one. */
function localStream(x: Executor): Framed<WorkerMessage, SubmitterMessage> {
  const [submitterSide, workerSide] = localPair({
    aReads: WorkerMessage,
    bReads: SubmitterMessage,
    protocol: JOB_PROTOCOL,
    peer: x.options.peerId,
  });
  serve(x, workerSide, x.options.peerId)
    .then(() => workerSide.close())
    .catch((err: Error) => workerSide.abort(err));
  return submitterSide;
}

/** The advert's load: no capacity while the node cannot score, its storage is blocked or it is paused. */
function advertisedLoad(x: Executor): JobLoad {
  const { options } = x;
  const capacity = options.scorer && !options.storage?.blocked() && !options.paused?.() ? options.maxJobs : 0;
  return jobLoad(
    [...x.running.values()].map((r) => r.activity),
    capacity,
  );
}

/** The advert's load now, stamped with this node's clock: sent with a job's messages (protocol/job.ts WorkerLoad). */
function reportedLoad(x: Executor): WorkerLoad {
  return { ...advertisedLoad(x), at: Date.now() };
}

/** Aborts the running jobs, stops serving, and waits (a while) for the jobs to end. */
async function stopExecutor(x: Executor): Promise<void> {
  x.stopped = true;
  const over = [...x.running.values()].map((entry) => {
    entry.abort.abort(new Error('shutdown'));
    return entry.over;
  });
  await x.options.host.unhandle(JOB_PROTOCOL);
  // The aborted jobs end (their submitters are told `shutdown`) before the caller closes the log.
  await settledWithin(over, STOP_WAIT_MS);
}

/** Waits until every one of `promises` settles, or `ms` passes. */
async function settledWithin(promises: Promise<unknown>[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.allSettled(promises),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

/** Serves one job stream: a new job (accepted, adopting an orphan, or refused) or one re-attaching. */
async function serve(x: Executor, wire: Wire, remotePeer: string): Promise<void> {
  const job = await readJob(x, wire);
  if (!job) return;
  const existing = x.running.get(job.jobId);
  if (existing) await reattach(x, wire, existing, job, remotePeer);
  else await admit(x, wire, job, remotePeer);
}

/** The stream's first message when it is a job; undefined when the stream ended or was refused. */
async function readJob(x: Executor, wire: Wire): Promise<JobRequest | undefined> {
  let first: SubmitterMessage | undefined;
  try {
    first = await wire.read();
  } catch (err) {
    // Say why (a buggy submitter learns it), then fail the stream: handleFramed counts a malformed,
    // oversized, truncated or missing request as the peer's offence (node/wire/offences.ts).
    await refuse(x.log, wire, '', 'bad-request', (err as Error).message).catch(() => {});
    throw err;
  }
  if (!first) return undefined;
  if (first.type !== 'job') {
    await refuse(x.log, wire, first.jobId, 'bad-request', 'the first message must be a job');
    return undefined;
  }
  return first;
}

/** Sends a refusal on the stream. */
function refuse(
  log: Logger,
  wire: Wire,
  jobId: string,
  reason: RefusalReason,
  message: string,
): Promise<void> {
  log('refusing job %s: %s (%s)', jobId, reason, message);
  return wire.send({ type: 'refused', jobId, reason, message });
}

/** A `job` naming a running job: its stream attaches to it, unless it does not match. */
async function reattach(x: Executor, wire: Wire, existing: Running, job: JobRequest, remotePeer: string) {
  const mismatch = reattachRefusal(existing, job, remotePeer);
  if (mismatch) {
    await refuse(x.log, wire, job.jobId, 'bad-request', mismatch);
    return;
  }
  x.log('job %s: the submitter re-attached (%d samples asked)', job.jobId, job.samples.length);
  await attach(existing.run, wire, job);
}

/** A new job: it adopts an orphaned run of the same work, is refused, or starts. */
async function admit(x: Executor, wire: Wire, job: JobRequest, remotePeer: string): Promise<void> {
  const why = refusal(job, remotePeer, x.options, admissionState(x));
  const orphan = why?.[0] === 'bad-request' ? null : adoptable(x.running.values(), job, remotePeer);
  if (orphan) {
    x.log('job %s takes over job %s, running without a stream', job.jobId, orphan.job.jobId);
    await attach(orphan.run, wire, job);
    return;
  }
  if (why) {
    await refuse(x.log, wire, job.jobId, ...why);
    return;
  }
  await attach(startRun(x, job, remotePeer).run, wire, job);
}

/** The node as a new job finds it: stopping or not, jobs admitted, jobs generating, jobs waiting. */
function admissionState(x: Executor): AdmissionState {
  const { generating, waiting } = advertisedLoad(x);
  return { stopped: x.stopped, running: x.running.size, generating, waiting };
}

/** Attaches the stream of `job` to `run`, for the samples the job asks for. */
function attach(run: JobRun, wire: Wire, job: JobRequest): Promise<void> {
  return run.attach(wire, job.samples, job.jobId, job.beats === true);
}

/** Starts a job: its work runs whatever happens to the streams attached to it. */
function startRun(x: Executor, job: JobRequest, submitter: string): Running {
  x.accepted += 1;
  const abort = new AbortController();
  const run = createJobRun({
    job,
    worker: x.options.peerId,
    leaseMs: job.leaseMs ?? DEFAULT_JOB_LEASE_MS,
    logged: (index) => loggedResult(x.options.sampleLog, job, index),
    onCancel: () => abort.abort(new Error('cancelled')),
    onAbandoned: () => abort.abort(new Error('abandoned')),
    load: () => reportedLoad(x),
  });
  const entry: Running = { job, submitter, abort, run, activity: newActivity(), over: Promise.resolve() };
  x.running.set(job.jobId, entry);
  x.options.onLoadChange?.();
  const deadline = setTimeout(() => abort.abort(new Error('deadline')), job.deadlineMs);
  x.info('%s', jobAcceptedLine(job, scoredRewards(x.options.sampleLog, job).length));
  entry.over = execute(x, entry)
    .then(
      () => null,
      (err: JobError) => failureOf(x, entry, err),
    )
    .then((failure) => finishRun(x, entry, deadline, failure));
  return entry;
}

/** Why a job failed, for its `end` (and a warning). */
function failureOf(x: Executor, work: JobWork, err: JobError): JobFailureEnd {
  const cause = (work.abort.signal.reason as Error | undefined)?.message;
  const reason = failureReason(err, cause, x.stopped);
  x.log.warn('job %s failed (%s): %s', work.job.jobId, reason, err.message);
  return { reason, message: err.message.slice(0, 2000) };
}

/** The job is over: its deadline cleared, what is left of it stopped, its slot freed, its `end` sent. */
function finishRun(x: Executor, entry: Running, deadline: NodeJS.Timeout, failure: JobFailureEnd | null) {
  clearTimeout(deadline);
  if (!entry.abort.signal.aborted) entry.abort.abort(new Error('job over'));
  x.running.delete(entry.job.jobId);
  x.info('%s', jobFinishedLine(entry.job, scoredRewards(x.options.sampleLog, entry.job), failure));
  entry.run.finish(failure);
  x.options.onLoadChange?.();
}

/**
 * Generates and scores the samples of the job not yet in the log, reporting each to its run (the
 * stream attached at the time, if any) as it is generated and once it is durable.
 */
async function execute(x: Executor, work: JobWork): Promise<void> {
  const todo = work.job.samples.filter((index) => !x.options.sampleLog.get(idOf(work.job, index)));
  if (todo.length === 0) {
    work.activity.waiting = false;
    return;
  }
  const pass: Pass = { todo, pending: [], inSandbox: new Set(), failure: null };
  const beat = startBeats(x, work.run, pass.inSandbox);
  try {
    await generateAndScore(x, work, pass);
  } finally {
    clearInterval(beat);
  }
}

/** Sends `scoring` heartbeats naming the samples in the sandbox, while there are any. */
function startBeats(x: Executor, run: JobRun, inSandbox: Set<number>): NodeJS.Timeout {
  return setInterval(() => {
    if (inSandbox.size > 0) run.scoring([...inSandbox]);
  }, x.options.scoringBeatMs ?? SCORING_BEAT_MS);
}

/**
 * execute's body: generation, each sample's scoring started as it arrives, then the wait for all.
 * The job ends only once every scoring it started is over: a sample is logged and reported before
 * the job's `end`, never after, and stop() returns before the log closes.
 */
async function generateAndScore(x: Executor, work: JobWork, pass: Pass): Promise<void> {
  const { job, abort } = work;
  let broken: { err: unknown } | null = null;
  let releaseSlot = () => {};
  try {
    releaseSlot = await takeSlot(x, work);
    await generateSamples(x, work, pass, releaseSlot);
  } catch (err) {
    // The adapter (or the wait for a slot) throws AbortedError when the job is aborted: the abort's
    // cause says why the job ends. Anything else breaks the job once its scorings stop.
    if (!abort.signal.aborted) {
      broken = { err };
      abort.abort(err);
    }
  } finally {
    releaseSlot();
    work.activity.waiting = false;
    work.activity.generating = false;
  }
  await Promise.all(pass.pending);
  if (broken) throw broken.err;
  throwIfUnfinished(x.options.sampleLog, job, pass, abort.signal);
}

/**
 * Waits for a job slot (admission keeps at most one job waiting: job-admission.ts `fullness`) and
 * marks the job generating; resolves to the slot's release. Rejects with AbortedError if the job is
 * aborted first.
 */
async function takeSlot(x: Executor, work: JobWork): Promise<() => void> {
  const release = await x.slots.acquire(work.abort.signal);
  work.activity.waiting = false;
  work.activity.generating = true;
  x.options.onLoadChange?.();
  return release;
}

/** Asks for the job's samples and starts scoring each one as it arrives; a model failure stops it. */
async function generateSamples(
  x: Executor,
  work: JobWork,
  pass: Pass,
  releaseSlot: () => void,
): Promise<void> {
  const { job, abort } = work;
  let generated = 0;
  for await (const outcome of x.options.models.generate(generateRequest(job, pass.todo, abort.signal))) {
    if (!outcome.ok) {
      pass.failure ??= { reason: 'model-error', message: outcome.error.message };
      abort.abort(new Error(outcome.error.message));
      break;
    }
    const index = pass.todo[outcome.index]!;
    // Waiting to score from now on: the load read on seeing the `generated` message already says so.
    const ticket = queueForScoring(work.activity);
    if (++generated === pass.todo.length) generationDone(x, work, releaseSlot);
    reportGenerated(x, work, index, outcome);
    // Score while the next samples generate.
    pass.inSandbox.add(index);
    pass.pending.push(scoreAndRecord(x, work, pass, { index, sample: outcome, ticket }));
  }
}

/**
 * Every sample of the job is generated, only scoring is left: its job slot goes to the job waiting
 * for one, if any, or is free for the next job (job-admission.ts `fullness`). Done before the last
 * `generated` message is sent, so a submitter that places the next job on seeing it never finds the
 * slot still taken.
 */
function generationDone(x: Executor, work: JobWork, releaseSlot: () => void): void {
  work.activity.generating = false;
  releaseSlot();
  x.options.onLoadChange?.();
}

/** The pass is over: throws its first failure, or why the job stopped before every sample was scored. */
function throwIfUnfinished(sampleLog: SampleLog, job: JobRequest, pass: Pass, signal: AbortSignal): void {
  if (pass.failure) throw jobError(pass.failure.reason, pass.failure.message);
  // Stopped (deadline, cancel, shutdown) before every sample was scored: say why.
  if (signal.aborted && job.samples.some((i) => !sampleLog.get(idOf(job, i))))
    throw signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
}

/** Counts a generated sample and tells the submitter (its scoring starts next). */
function reportGenerated(x: Executor, work: JobWork, index: number, sample: Sample): void {
  x.log('job %s: sample %d generated in %d ms', work.job.jobId, index, Math.round(sample.latencyMs));
  metrics().generated.inc({ model: work.job.model });
  metrics().completionTokens.inc({ model: work.job.model }, sample.usage.completionTokens);
  work.run.generated({ ...generatedMessage(work.job.jobId, index, sample), load: reportedLoad(x) });
}

/** A generated sample on its way to the sandbox: its index in the job, and its place in the job's activity. */
interface Generated {
  index: number;
  sample: Sample;
  ticket: ScoringTicket;
}

/** Scores a generated sample, then logs and reports it; a failure aborts the job (the first says why). */
function scoreAndRecord(x: Executor, work: JobWork, pass: Pass, generated: Generated): Promise<void> {
  const { signal } = work.abort;
  // After a 0 ms timer: the model request this sample makes way for (the job's fan-out after its
  // warm-up, the next job's first request) leaves first, then the scoring's synchronous part (a
  // sandbox spawn; for an unscorable sample, the log's durable, signed write). undici writes a
  // fetch's bytes one event-loop turn after the call, so a setImmediate would still run in front of
  // it (measured: 15 ms per request before, 3 ms after; test/worker/executor-slots.test.ts).
  return afterIo(0)
    .then(() => scoreSample(x, work, generated))
    .finally(() => {
      generated.ticket.leave();
      pass.inSandbox.delete(generated.index);
    })
    .then((body) => recordSample(x, work, body))
    .catch((err: JobError) => {
      if (!signal.aborted) pass.failure ??= { reason: err.reason ?? 'sandbox-error', message: err.message };
      work.abort.abort(err);
    });
}

/** A scored sample: appended to the log, counted, then reported (never before it is durable). */
function recordSample(x: Executor, work: JobWork, body: SampleBody): void {
  const logged = logSample(x.options, body, work.job.task);
  countScored(work.job.model, body.score.reward);
  x.options.onSample?.(logged);
  work.run.scored(sampleResultOf(logged.body, work.job.jobId, logged.seq));
  x.info('%s', sampleLine(logged.body));
}

/** Counts a durable scored sample in this process's metrics. */
function countScored(model: string, reward: number): void {
  metrics().scored.inc({ model, verdict: verdictOf(reward) });
  if (reward >= 1) metrics().verified.inc({ model });
}

/** The SampleBody of a generated sample, scored in the job's workspace (0 at once when unscorable). */
async function scoreSample(x: Executor, work: JobWork, generated: Generated): Promise<SampleBody> {
  const { job, abort } = work;
  const { index, sample, ticket } = generated;
  const workspaceDir = await workspaceDirFor(x.options, job, abort.signal);
  const unscorable = unscorableReason(sample);
  if (unscorable) ticket.leave();
  const score = unscorable
    ? unscorableScore(unscorable, await x.options.scorer!.fingerprint(job.task, workspaceDir))
    : sandboxScore(await runScorer(x, work, workspaceDir, generated));
  return sampleBody(job, index, sample, score);
}

/** Scores a sample in the sandbox once a scoring slot is free (the job's activity says which). */
function runScorer(
  x: Executor,
  work: JobWork,
  workspaceDir: string,
  generated: Generated,
): Promise<ScoreResult> {
  const { sample, ticket } = generated;
  return ticket.run(x.scoring, async () => {
    const endTimer = metrics().scoringSeconds.startTimer();
    try {
      return await x.options.scorer!.score({
        task: work.job.task,
        workspaceDir,
        candidate: candidateOf(sample),
        truncated: sample.truncated,
        signal: work.abort.signal,
      });
    } finally {
      endTimer();
    }
  });
}

/**
 * The directory of a job's workspace: held now, or once the fetch under way is ready (the samples
 * count as waiting to score meanwhile: their tickets, queueForScoring). A fetch that fails is an
 * infrastructure failure: the job fails and its samples are placed again, never scored 0.
 */
async function workspaceDirFor(
  options: Pick<JobExecutorOptions, 'workspaces' | 'fetching'>,
  job: JobRequest,
  signal: AbortSignal,
): Promise<string> {
  const id = job.task.workspace.id;
  const held = options.workspaces.get(id);
  if (held) return held;
  if (!options.fetching?.has(id))
    throw jobError('sandbox-error', `this node no longer holds workspace ${id}`);
  try {
    return await options.fetching.whenReady(id, signal);
  } catch (err) {
    signal.throwIfAborted();
    const why = `workspace ${id} could not be made ready here: ${(err as Error).message}`;
    throw jobError('sandbox-error', why);
  }
}

/**
 * Appends a scored sample to the log. A storage fault (full disk, broken log) fails the job as
 * `internal`: the sample is not reported (never a reward), the submitter places it again elsewhere.
 */
function logSample(
  options: Pick<JobExecutorOptions, 'sampleLog' | 'storage'>,
  body: SampleBody,
  task: Task,
): LoggedSample {
  try {
    // The task row is kept beside the sample and its hash signed with it (collectors fetch it, /vtnode/task/1).
    return options.sampleLog.append(body, task);
  } catch (err) {
    if (!options.storage?.failed(err, options.sampleLog.path)) throw err;
    const message = `cannot log sample ${body.index} to ${options.sampleLog.path}: ${(err as Error).message}`;
    throw jobError('internal', message);
  }
}

/** The id of sample `index` of `job`. */
function idOf(job: JobRequest, index: number): string {
  return sampleId(job.task.id, job.model, index, sampleSeed(job.sampling.seedBase, index));
}

/** Rewards of the job's samples already in the log. */
function scoredRewards(sampleLog: SampleLog, job: JobRequest): number[] {
  return job.samples.flatMap((i) => sampleLog.get(idOf(job, i))?.body.score.reward ?? []);
}

/** The `sample` message of sample `index` of `job` when it is in the log, else undefined. */
function loggedResult(sampleLog: SampleLog, job: JobRequest, index: number): SampleResult | undefined {
  const logged = sampleLog.get(idOf(job, index));
  return logged ? sampleResultOf(logged.body, job.jobId, logged.seq) : undefined;
}
