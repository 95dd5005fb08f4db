import { canonicalJson } from '../../protocol/canonical.ts';
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
  WorkerMessage,
} from '../../protocol/job.ts';
import { contentHash, type SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
import { JOB_PROTOCOL } from '../../protocol/topics.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { limiter } from '../async/semaphore.ts';
import { logger } from '../logger.ts';
import { metrics, verdictOf } from '../metrics.ts';
import type { Sample, SampleOutcome } from '../models/adapter.ts';
import type { ModelService } from '../models/service.ts';
import type { Framed } from '../wire/framed.ts';
import { localPair } from '../wire/local.ts';
import { handleFramed, type StreamHost } from '../wire/streams.ts';
import { jobAcceptedLine, jobFinishedLine, sampleLine } from './info-lines.ts';
import { type JobActivity, jobLoad, newActivity, trackScoring } from './job-load.ts';
import { createJobRun, type JobRun } from './job-run.ts';
import type { LoggedSample, SampleLog } from './sample-log.ts';

/** Counts a durable scored sample in this process's metrics. */
function countScored(model: string, reward: number): void {
  metrics().scored.inc({ model, verdict: verdictOf(reward) });
  if (reward >= 1) metrics().verified.inc({ model });
}

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
  /** Jobs run at once; more are refused as `full`. */
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
  load(): { queued: number; running: number; capacity: number };
  /** Jobs accepted (started) since the executor started. */
  accepted(): number;
  /** Content ids of the workspaces the running jobs score against. */
  workspacesInUse(): string[];
  /** Aborts running jobs (their submitters re-place the rest) and stops accepting new ones. */
  stop(): Promise<void>;
}

type Wire = Framed<SubmitterMessage, WorkerMessage>;

/** A job this node is running, with the submitter it belongs to. */
interface Running {
  job: JobRequest;
  submitter: string;
  abort: AbortController;
  run: JobRun;
  /** Generating, scoring or waiting for a scoring slot: the advert's queued/running split. */
  activity: JobActivity;
  /** Settles once the job is over and its end is sent (stop waits for it before the log closes). */
  over: Promise<void>;
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
  const log = logger('vtnode:worker:executor');
  const info = options.jobLines === false ? log : log.info;
  const scoring = limiter(options.maxScoring ?? 2);
  const running = new Map<string, Running>();
  let stopped = false;
  let accepted = 0;

  function refuse(wire: Wire, jobId: string, reason: RefusalReason, message: string): Promise<void> {
    log('refusing job %s: %s (%s)', jobId, reason, message);
    return wire.send({ type: 'refused', jobId, reason, message });
  }

  function refusal(job: JobRequest, remotePeer: string): [RefusalReason, string] | null {
    if (job.submitter !== remotePeer) {
      return ['bad-request', `the job names submitter ${job.submitter} but came from ${remotePeer}`];
    }
    if (stopped) return ['full', 'the node is shutting down'];
    const blocked = options.storage?.blocked();
    if (blocked) return ['full', `${blocked}: this node takes no jobs until that is fixed`];
    const paused = options.paused?.();
    if (paused) return ['full', `paused (${paused}): this node takes no new jobs until that is over`];
    if (!options.scorer) return ['sandbox-unavailable', 'this node has no working sandbox'];
    if (!options.workspaces.has(job.task.workspace.id) && !options.fetching?.has(job.task.workspace.id)) {
      return ['workspace-missing', `this node does not hold workspace ${job.task.workspace.id}`];
    }
    if (!options.models.adapterFor(job.model))
      return ['model-missing', `no server of this node serves ${job.model}`];
    if (running.size >= options.maxJobs)
      return ['full', `${running.size} of ${options.maxJobs} job slots busy`];
    return null;
  }

  /**
   * Appends a scored sample to the log. A storage fault (full disk, broken log) fails the job as
   * `internal`: the sample is not reported (never a reward), the submitter places it again elsewhere.
   */
  function logSample(body: SampleBody, task: Task): LoggedSample {
    try {
      // The task row is kept beside the sample and its hash signed with it (collectors fetch it, /vtnode/task/1).
      return options.sampleLog.append(body, task);
    } catch (err) {
      if (!options.storage?.failed(err, options.sampleLog.path)) throw err;
      const message = `cannot log sample ${body.index} to ${options.sampleLog.path}: ${(err as Error).message}`;
      throw Object.assign(new Error(message), { reason: 'internal' as const });
    }
  }

  function result(jobId: string, logged: LoggedSample): SampleResult {
    const b = logged.body;
    return {
      type: 'sample',
      jobId,
      sampleId: b.sampleId,
      index: b.index,
      seed: b.generation.seed,
      reward: b.score.reward,
      passed: b.score.passed,
      failed: b.score.failed,
      reasons: b.score.reasons,
      truncated: b.generation.truncated,
      usage: b.generation.usage,
      warm: b.generation.warm,
      latencyMs: b.generation.latencyMs,
      tokensPerSecond: b.generation.tokensPerSecond,
      contentHash: b.contentHash,
      evalFingerprint: b.score.evalFingerprint,
      seq: logged.seq,
      scoredAt: b.scoredAt,
    };
  }

  /**
   * The directory of a job's workspace: held now, or once the fetch under way is ready (the samples
   * count as waiting to score meanwhile, so the submitter gets heartbeats). A fetch that fails is an
   * infrastructure failure: the job fails and its samples are placed again, never scored 0.
   */
  async function workspaceDirFor(
    job: JobRequest,
    signal: AbortSignal,
    activity: JobActivity,
  ): Promise<string> {
    const id = job.task.workspace.id;
    const held = options.workspaces.get(id);
    if (held) return held;
    if (!options.fetching?.has(id))
      throw Object.assign(new Error(`this node no longer holds workspace ${id}`), {
        reason: 'sandbox-error' as const,
      });
    activity.waitingToScore++;
    try {
      return await options.fetching.whenReady(id, signal);
    } catch (err) {
      signal.throwIfAborted();
      const why = `workspace ${id} could not be made ready here: ${(err as Error).message}`;
      throw Object.assign(new Error(why), { reason: 'sandbox-error' as const });
    } finally {
      activity.waitingToScore--;
    }
  }

  async function scoreSample(
    job: JobRequest,
    index: number,
    sample: Sample,
    signal: AbortSignal,
    activity: JobActivity,
  ): Promise<SampleBody> {
    const workspaceDir = await workspaceDirFor(job, signal, activity);
    const seed = sampleSeed(job.sampling.seedBase, index);
    const candidate = sample.extract.ok ? sample.extract.code : sample.text;
    let score: SampleBody['score'];
    // An answer cut at max tokens, or without exactly one code block, scores 0 whatever its tests
    // would say: no sandbox run is spent on it.
    const unscorable = sample.truncated
      ? 'truncated: the generation stopped at max tokens (finish_reason length)'
      : !sample.extract.ok
        ? `answer-format: ${sample.extract.flag} (${sample.extract.blocks} code blocks)`
        : null;
    if (unscorable) {
      score = {
        reward: 0,
        passed: 0,
        failed: 0,
        reasons: [unscorable],
        evalFingerprint: await options.scorer!.fingerprint(job.task, workspaceDir),
        diagnostics: '',
      };
    } else {
      const r = await trackScoring(activity, scoring, async () => {
        const endTimer = metrics().scoringSeconds.startTimer();
        try {
          return await options.scorer!.score({
            task: job.task,
            workspaceDir,
            candidate,
            truncated: sample.truncated,
            signal,
          });
        } finally {
          endTimer();
        }
      });
      // An infrastructure failure (the scorer already tried again) is never stored as a 0: the job fails
      // as a sandbox error and the submitter places the unfinished samples again.
      if (r.status === 'error' || r.reward === null)
        throw Object.assign(new Error(`scoring failed for infrastructure reasons: ${r.error}`), {
          reason: 'sandbox-error' as const,
        });
      score = {
        reward: r.reward,
        passed: r.passed,
        failed: r.failed,
        reasons: r.reasons.slice(0, 32).map((x) => x.slice(0, 200)),
        evalFingerprint: r.fingerprint,
        diagnostics: r.diagnostics.slice(0, 64 * 1024),
      };
    }
    return {
      v: 1,
      sampleId: sampleId(job.task.id, job.model, index, seed),
      taskId: job.task.id,
      split: job.task.split,
      promptFingerprint: job.task.promptFingerprint,
      model: job.model,
      index,
      candidate,
      contentHash: contentHash(candidate),
      generation: {
        sampling: job.sampling,
        seed,
        finishReason: sample.finishReason,
        truncated: sample.truncated,
        usage: {
          prompt: sample.usage.promptTokens,
          completion: sample.usage.completionTokens,
          cached: sample.usage.cachedTokens,
        },
        warm: sample.warm.warm === 'warm',
        latencyMs: sample.latencyMs,
        tokensPerSecond: sample.tokensPerSecond,
      },
      score,
      jobId: job.jobId,
      scoredAt: Date.now(),
    };
  }

  const idOf = (job: JobRequest, index: number) =>
    sampleId(job.task.id, job.model, index, sampleSeed(job.sampling.seedBase, index));

  /**
   * Generates and scores the samples of `job` not yet in the log, reporting each to `run` (the stream
   * attached at the time, if any) as it is generated and once it is durable.
   */
  async function execute(
    job: JobRequest,
    run: JobRun,
    abort: AbortController,
    activity: JobActivity,
  ): Promise<void> {
    const todo = job.samples.filter((index) => !options.sampleLog.get(idOf(job, index)));
    if (todo.length === 0) return;

    const pending: Promise<void>[] = [];
    // Generated samples not yet scored (waiting for a sandbox slot or running): heartbeats name them.
    const inSandbox = new Set<number>();
    const beat = setInterval(() => {
      if (inSandbox.size > 0) run.scoring([...inSandbox]);
    }, options.scoringBeatMs ?? SCORING_BEAT_MS);
    try {
      await generateAndScore(job, run, abort, activity, todo, pending, inSandbox);
    } finally {
      clearInterval(beat);
    }
  }

  /** execute's body: generation, each sample's scoring started as it arrives, then the wait for all. */
  async function generateAndScore(
    job: JobRequest,
    run: JobRun,
    abort: AbortController,
    activity: JobActivity,
    todo: number[],
    pending: Promise<void>[],
    inSandbox: Set<number>,
  ): Promise<void> {
    const signal = abort.signal;
    let failure: { reason: 'model-error' | 'sandbox-error' | 'internal'; message: string } | null = null;
    const outcomes: AsyncIterable<SampleOutcome> = options.models.generate({
      model: job.model,
      messages: job.task.messages,
      k: todo.length,
      seeds: todo.map((i) => sampleSeed(job.sampling.seedBase, i)),
      sampling: {
        temperature: job.sampling.temperature,
        topP: job.sampling.topP,
        maxTokens: job.sampling.maxTokens,
      },
      promptFingerprint: job.task.promptFingerprint,
      signal,
    });
    for await (const outcome of outcomes) {
      if (!outcome.ok) {
        failure ??= { reason: 'model-error', message: outcome.error.message };
        abort.abort(new Error(outcome.error.message));
        break;
      }
      const index = todo[outcome.index]!;
      log('job %s: sample %d generated in %d ms', job.jobId, index, Math.round(outcome.latencyMs));
      metrics().generated.inc({ model: job.model });
      metrics().completionTokens.inc({ model: job.model }, outcome.usage.completionTokens);
      run.generated({
        type: 'generated',
        jobId: job.jobId,
        index,
        usage: {
          prompt: outcome.usage.promptTokens,
          completion: outcome.usage.completionTokens,
          cached: outcome.usage.cachedTokens,
        },
        warm: outcome.warm.warm === 'warm',
        latencyMs: outcome.latencyMs,
        tokensPerSecond: outcome.tokensPerSecond,
      });
      // Score while the next samples generate.
      inSandbox.add(index);
      pending.push(
        scoreSample(job, index, outcome, signal, activity)
          .finally(() => inSandbox.delete(index))
          .then((body) => {
            const logged = logSample(body, job.task);
            countScored(job.model, body.score.reward);
            options.onSample?.(logged);
            run.scored(result(job.jobId, logged));
            info('%s', sampleLine(logged.body));
          })
          .catch((err: Error & { reason?: 'internal' }) => {
            if (!signal.aborted) failure ??= { reason: err.reason ?? 'sandbox-error', message: err.message };
            abort.abort(err);
          }),
      );
    }
    activity.generating = false;
    await Promise.all(pending);
    if (failure) throw Object.assign(new Error(failure.message), { reason: failure.reason });
    // Stopped (deadline, cancel, shutdown) before every sample was scored: say why.
    if (signal.aborted && job.samples.some((i) => !options.sampleLog.get(idOf(job, i))))
      throw signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
  }

  /** Rewards of the job's samples already in the log. */
  function scoredRewards(job: JobRequest): number[] {
    return job.samples.flatMap((i) => options.sampleLog.get(idOf(job, i))?.body.score.reward ?? []);
  }

  /** Starts a job: its work runs whatever happens to the streams attached to it. */
  function startRun(job: JobRequest, submitter: string): Running {
    accepted += 1;
    const abort = new AbortController();
    const run = createJobRun({
      job,
      worker: options.peerId,
      leaseMs: job.leaseMs ?? DEFAULT_JOB_LEASE_MS,
      logged: (index) => {
        const logged = options.sampleLog.get(idOf(job, index));
        return logged ? result(job.jobId, logged) : undefined;
      },
      onCancel: () => abort.abort(new Error('cancelled')),
      onAbandoned: () => abort.abort(new Error('abandoned')),
    });
    const entry: Running = { job, submitter, abort, run, activity: newActivity(), over: Promise.resolve() };
    running.set(job.jobId, entry);
    options.onLoadChange?.();
    const deadline = setTimeout(() => abort.abort(new Error('deadline')), job.deadlineMs);
    info('%s', jobAcceptedLine(job, scoredRewards(job).length));
    entry.over = execute(job, run, abort, entry.activity)
      .then(
        () => null,
        (err: Error & { reason?: 'model-error' | 'sandbox-error' }) => {
          const cause = (abort.signal.reason as Error | undefined)?.message;
          const reason =
            err.reason ??
            (cause === 'deadline'
              ? 'deadline'
              : cause === 'cancelled' || cause === 'abandoned'
                ? 'cancelled'
                : stopped
                  ? 'shutdown'
                  : 'internal');
          log.warn('job %s failed (%s): %s', job.jobId, reason, err.message);
          return { reason, message: err.message.slice(0, 2000) } as const;
        },
      )
      .then((failure) => {
        clearTimeout(deadline);
        if (!abort.signal.aborted) abort.abort(new Error('job over'));
        running.delete(job.jobId);
        info('%s', jobFinishedLine(job, scoredRewards(job), failure));
        run.finish(failure);
        options.onLoadChange?.();
      });
    return entry;
  }

  /** Why a `job` naming a running job cannot re-attach to it, or null. */
  function reattachRefusal(entry: Running, job: JobRequest, remotePeer: string): string | null {
    if (remotePeer !== entry.submitter) return `job ${job.jobId} belongs to another submitter`;
    if (job.task.id !== entry.job.task.id || job.model !== entry.job.model)
      return `job ${job.jobId} is running for another task or model`;
    const extra = job.samples.filter((i) => !entry.job.samples.includes(i));
    if (extra.length > 0) return `job ${job.jobId} does not include samples ${extra.join(', ')}`;
    return null;
  }

  /**
   * A job of the same submitter running without a stream for the same task, model and sampling, whose
   * samples include all of `job`'s: the submitter placed that work again (it restarted, or its lease
   * lapsed while this node was unreachable). The new job takes it over instead of generating the
   * same samples a second time.
   */
  function adoptable(job: JobRequest, remotePeer: string): Running | null {
    for (const entry of running.values()) {
      if (entry.submitter !== remotePeer || entry.run.attached) continue;
      if (entry.job.task.id !== job.task.id || entry.job.model !== job.model) continue;
      if (canonicalJson(entry.job.sampling) !== canonicalJson(job.sampling)) continue;
      if (job.samples.every((i) => entry.job.samples.includes(i))) return entry;
    }
    return null;
  }

  async function serve(wire: Wire, remotePeer: string): Promise<void> {
    let first: SubmitterMessage | undefined;
    try {
      first = await wire.read();
    } catch (err) {
      // Say why (a buggy submitter learns it), then fail the stream: handleFramed counts a malformed,
      // oversized, truncated or missing request as the peer's offence (node/wire/offences.ts).
      await refuse(wire, '', 'bad-request', (err as Error).message).catch(() => {});
      throw err;
    }
    if (!first) return;
    if (first.type !== 'job') {
      await refuse(wire, first.jobId, 'bad-request', 'the first message must be a job');
      return;
    }
    const job = first;
    const existing = running.get(job.jobId);
    if (existing) {
      const mismatch =
        job.submitter !== remotePeer
          ? `the job names submitter ${job.submitter} but came from ${remotePeer}`
          : reattachRefusal(existing, job, remotePeer);
      if (mismatch) {
        await refuse(wire, job.jobId, 'bad-request', mismatch);
        return;
      }
      log('job %s: the submitter re-attached (%d samples asked)', job.jobId, job.samples.length);
      await existing.run.attach(wire, job.samples, job.jobId, job.beats === true);
      return;
    }
    const why = refusal(job, remotePeer);
    const orphan = why?.[0] === 'bad-request' ? null : adoptable(job, remotePeer);
    if (orphan) {
      log('job %s takes over job %s, running without a stream', job.jobId, orphan.job.jobId);
      await orphan.run.attach(wire, job.samples, job.jobId, job.beats === true);
      return;
    }
    if (why) {
      await refuse(wire, job.jobId, ...why);
      return;
    }
    await startRun(job, remotePeer).run.attach(wire, job.samples, job.jobId, job.beats === true);
  }

  return {
    async start() {
      await handleFramed<typeof SubmitterMessage, WorkerMessage>(
        options.host,
        JOB_PROTOCOL,
        (wire, connection) => serve(wire, connection.remotePeer.toString()),
        {
          schema: SubmitterMessage,
          maxFrameBytes: MAX_JOB_FRAME_BYTES,
        },
      );
    },
    local() {
      const [submitterSide, workerSide] = localPair({
        aReads: WorkerMessage,
        bReads: SubmitterMessage,
        protocol: JOB_PROTOCOL,
        peer: options.peerId,
      });
      serve(workerSide, options.peerId)
        .then(() => workerSide.close())
        .catch((err: Error) => workerSide.abort(err));
      return submitterSide;
    },
    load() {
      const capacity =
        options.scorer && !options.storage?.blocked() && !options.paused?.() ? options.maxJobs : 0;
      return jobLoad(
        [...running.values()].map((r) => r.activity),
        capacity,
      );
    },
    accepted: () => accepted,
    workspacesInUse: () => [...new Set([...running.values()].map((r) => r.job.task.workspace.id))],
    async stop() {
      stopped = true;
      const over = [...running.values()].map((entry) => {
        entry.abort.abort(new Error('shutdown'));
        return entry.over;
      });
      await options.host.unhandle(JOB_PROTOCOL);
      // The aborted jobs end (their submitters are told `shutdown`) before the caller closes the log.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(over),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, STOP_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}
