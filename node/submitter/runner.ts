import { peerIdFromString } from '@libp2p/peer-id';
import type { FleetNode } from '../../placement/fleet-view.ts';
import { createHedger, type HedgeOptions, type Hedger } from '../../placement/hedge.ts';
import { hedgeTick, type JobProgress } from '../../placement/hedge-tick.ts';
import {
  detachedDeadline,
  failedJobVerdict,
  type LostVerdict,
  lostVerdict,
  nextReattachPause,
  REATTACH_MIN_MS,
  type ReleaseVerdict,
  refusalVerdict,
  satOnJob,
} from '../../placement/job-fate.ts';
import { createLeaseBook, type Lease, type LeaseBook, type Released } from '../../placement/lease-book.ts';
import { createPlacer, type Placer } from '../../placement/placer.ts';
import { createReputation, type Reputation } from '../../placement/reputation.ts';
import { type BackPressure, createBackPressure } from '../../placement/room.ts';
import { createThroughput, type Throughput } from '../../placement/throughput.ts';
import { placeTick, type RoomState, stallAfterTick, stalledFor } from '../../placement/tick.ts';
import {
  DEFAULT_JOB_LEASE_MS,
  type JobEnd,
  type JobRequest,
  type SampleGenerated,
  type SampleResult,
  type SubmitterMessage,
  type WorkerLoad,
  type WorkerMessage,
} from '../../protocol/job.ts';
import type { Task } from '../../protocol/task.ts';
import { pause as wait } from '../async/sleep.ts';
import { type Logger, logger } from '../logger.ts';
import { metrics } from '../metrics.ts';
import type { Framed } from '../wire/framed.ts';
import type { StreamHost } from '../wire/streams.ts';
import type { Campaign } from './campaign-store.ts';
import { type JobEvent, submitJob } from './job-client.ts';

export interface CampaignRunnerOptions {
  /** The campaign's persistent state (created or resumed by the campaign store). */
  campaign: Campaign;
  /** Tasks of the campaign by id (the full task travels in each job). */
  tasks: ReadonlyMap<string, Task>;
  /** This node's peer id (the submitter). */
  peerId: string;
  /** The fleet now: called before every placement. */
  nodes: () => readonly FleetNode[];
  /** The libp2p host job streams to other nodes are opened from. */
  host: StreamHost;
  /** A job stream to this node's own executor (libp2p does not dial itself). */
  local: () => Framed<WorkerMessage, SubmitterMessage>;
  /** Time a worker has for one job before it is re-placed, ms (extended on progress). */
  jobDeadlineMs?: number;
  /** Time a job whose stream broke keeps its lease while the submitter re-attaches, ms (default 60 s). */
  leaseMs?: number;
  /** Placements per (task, model) before its remaining samples are given up. */
  maxAttempts?: number;
  /** Nodes that returned a scored sample to this submitter, shared by its campaigns and added to here; others are on probation (one job at a time). */
  proven?: Set<string>;
  /** When to back up a silent job on another node (placement/hedge.ts); false never does. */
  hedge?: HedgeOptions | false;
  /** Time a worker has to send `end` after a job's last sample before its stream is closed, ms (default 10 s). */
  endGraceMs?: number;
  /** Load slack ε of the bounded-load rendezvous placement. */
  epsilon?: number;
  /** How long to wait for an eligible node before giving up the campaign, ms (nodes cooling down after failures are waited for). */
  noNodeTimeoutMs?: number;
  /** Called when progress changes (throttle on the caller's side). */
  onProgress?: () => void;
  /** Cancels the campaign: running jobs are cancelled, their samples stay unfinished (a resume runs them). */
  signal?: AbortSignal;
}

export interface CampaignOutcome {
  status: 'done' | 'cancelled' | 'stalled';
  /** Samples given up after maxAttempts placements. */
  exhausted: number;
  /** Why the campaign stalled (no eligible node), when it did. */
  problem: string | null;
}

export interface CampaignRunner {
  /** Resolves when every sample is scored (or given up), the campaign is cancelled or stalls. */
  readonly done: Promise<CampaignOutcome>;
  /** Jobs running now, by node. */
  running(): { jobId: string; taskId: string; peerId: string; samples: number }[];
  /** The last reason a job could not be placed (shown by the progress display). */
  problem(): string | null;
}

/** A job stream's `lost` event: it ended without the worker's `end`. */
type Lost = Extract<JobEvent, { type: 'lost' }>;

/** What the runner tracks of a running job's progress: the hedger's view, and its scored samples. */
interface RunningProgress extends JobProgress {
  /** Scored samples the job sent. */
  scored: number;
}

/** A job's attachment to its worker, across the streams of one lease. */
interface Attachment {
  /** True once the worker accepted the job on one of its streams. */
  accepted: boolean;
  /** When its stream broke (ms since epoch), or null while attached. */
  detachedAt: number | null;
  /** The pause before the next attempt to re-attach, ms. */
  pause: number;
}

/** Everything one campaign's run shares between its steps. */
interface Run {
  /** The runner's options, as given. */
  readonly options: CampaignRunnerOptions;
  /** The submitter's log. */
  readonly log: Logger;
  /** The campaign's persistent state. */
  readonly campaign: Campaign;
  /** Time a worker has for one job, ms (extended on progress). */
  readonly deadlineMs: number;
  /** Time a job whose stream broke keeps its lease, ms. */
  readonly leaseMs: number;
  /** How long to wait for an eligible node before the campaign stalls, ms. */
  readonly noNodeTimeoutMs: number;
  /** Time a worker has to end a job after its last sample, ms. */
  readonly endGraceMs: number;
  /** Nodes' failures and successes (placement/reputation.ts). */
  readonly reputation: Reputation;
  /** Nodes' measured speed per model (placement/throughput.ts). */
  readonly throughput: Throughput;
  /** The placer (placement/placer.ts). */
  readonly placer: Placer;
  /** The lease book: every sample pending, leased, done or given up. */
  readonly book: LeaseBook;
  /** The hedger, or null when jobs are never backed up. */
  readonly hedger: Hedger | null;
  /** Running jobs' stream aborts, by job id. */
  readonly streams: Map<string, AbortController>;
  /** Per running job: its last progress and heartbeat (ms since epoch) and how many scored samples it sent. */
  readonly progress: Map<string, RunningProgress>;
  /** peerId → its last progress on any job (the hedger counts a node's silence, not a job's). */
  readonly nodeProgress: Map<string, number>;
  /** Backup job id → the job it backs up. */
  readonly backups: Map<string, string>;
  /** Nodes that returned a scored sample (out of probation). */
  readonly delivered: Set<string>;
  /** Running jobs' leases, by job id. */
  readonly leases: Map<string, Lease>;
  /** Nodes that refused a job as full (back-pressure). */
  readonly pressure: BackPressure;
  /** peerId → the load its last job message reported (room.reported). */
  readonly reported: Map<string, WorkerLoad>;
  /** Probation, back-pressure and reported loads for placement. */
  readonly room: RoomState;
  /** The last reason a job could not be placed or ran into trouble. */
  lastProblem: string | null;
  /** Since when no node could ever take the waiting work (ms since epoch), or null. */
  noNodeSince: number | null;
  /** Ends the main loop's wait for its next round early, while it waits. */
  wake: (() => void) | null;
}

/**
 * The submitter: places each (task, model)'s samples as one job on the node the placer picks (warm
 * first, then bounded-load rendezvous), streams results into the campaign store, and re-places the
 * unfinished samples of a job whose worker refuses, fails or misses its deadline. A job whose stream
 * breaks is not re-placed at once: the worker goes on with it and the submitter re-attaches; only a
 * lease that lapses (`leaseMs` without a stream) or a worker that is plainly gone re-places it.
 */
export function runCampaign(options: CampaignRunnerOptions): CampaignRunner {
  const run = createRun(options);
  addPending(run);
  const done = driveCampaign(run);
  return { done, running: () => runningJobs(run.book), problem: () => run.lastProblem };
}

/** A run's state at its start: placement parts, an empty lease book, no job running. */
function createRun(options: CampaignRunnerOptions): Run {
  const reputation = createReputation();
  const throughput = createThroughput();
  const delivered = options.proven ?? new Set<string>();
  const pressure = createBackPressure();
  const reported = new Map<string, WorkerLoad>();
  return {
    options,
    log: logger('vtnode:submitter'),
    campaign: options.campaign,
    deadlineMs: options.jobDeadlineMs ?? 30 * 60_000,
    leaseMs: options.leaseMs ?? DEFAULT_JOB_LEASE_MS,
    noNodeTimeoutMs: options.noNodeTimeoutMs ?? 60_000,
    endGraceMs: options.endGraceMs ?? 10_000,
    reputation,
    throughput,
    placer: createPlacer({ reputation, weight: throughput.weight, epsilon: options.epsilon ?? 0.1 }),
    book: createLeaseBook({ maxAttempts: options.maxAttempts ?? 5 }),
    hedger: options.hedge === false ? null : createHedger(options.hedge),
    streams: new Map(),
    progress: new Map(),
    nodeProgress: new Map(),
    backups: new Map(),
    delivered,
    leases: new Map(),
    pressure,
    reported,
    room: { selfPeerId: options.peerId, proven: delivered, busyUntil: pressure.busyUntil, reported },
    lastProblem: null,
    noNodeSince: null,
    wake: null,
  };
}

/** Puts the campaign's unfinished samples in the lease book, with the placements made before a restart. */
function addPending(run: Run): void {
  for (const p of run.campaign.pending()) run.book.add(p.taskId, p.model, p.samples, p.attempts);
}

/** Jobs running now, by node. */
function runningJobs(book: LeaseBook): ReturnType<CampaignRunner['running']> {
  return book
    .jobs()
    .map((j) => ({ jobId: j.jobId, taskId: j.taskId, peerId: j.peerId, samples: j.samples.length }));
}

/** The main loop: a round per half second or change until every sample is over, the campaign is cancelled or stalls. */
async function driveCampaign(run: Run): Promise<CampaignOutcome> {
  while (!run.book.complete) {
    if (run.options.signal?.aborted) break;
    const now = Date.now();
    expireLeases(run, now);
    // The fleet view once per round (the daemon's view sorts its nodes on each call).
    const nodes = run.options.nodes();
    placeAll(run, now, nodes);
    hedgeStalled(run, now, nodes);
    if (stalledFor(run.noNodeSince, now, run.noNodeTimeoutMs)) return outcome(run, 'stalled');
    await nextRound(run);
  }
  return finish(run);
}

/** Waits for the next round: half a second, or until something changes (`poke`). */
async function nextRound(run: Run): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 500);
    run.wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  run.wake = null;
}

/** Something changed: the main loop's next round starts now, and the caller hears of it. */
function poke(run: Run): void {
  run.wake?.();
  run.options.onProgress?.();
}

/** Ends the campaign (cancelled or done) once its streams wound down. */
async function finish(run: Run): Promise<CampaignOutcome> {
  // Let cancelled streams wind down before reporting (each stream's end pokes the loop's wait).
  while (run.streams.size > 0) await nextRound(run);
  const status = run.options.signal?.aborted ? 'cancelled' : 'done';
  run.campaign.finish(status, Date.now());
  return outcome(run, status);
}

/** The campaign's outcome: a done campaign shows its last problem only when it gave samples up. */
function outcome(run: Run, status: CampaignOutcome['status']): CampaignOutcome {
  const { exhausted } = run.book.stats();
  return { status, exhausted, problem: status === 'done' && exhausted === 0 ? null : run.lastProblem };
}

/** Releases the jobs whose lease lapsed: their streams end and their nodes are blamed. */
function expireLeases(run: Run, now: number): void {
  for (const r of run.book.expire(now)) {
    run.streams.get(r.jobId)?.abort(new Error('deadline'));
    blame(run, r.peerId);
    released(run, r, 'deadline');
  }
}

/** One placement round (placement/tick.ts decides; this starts the jobs it leased). */
function placeAll(run: Run, now: number, nodes: readonly FleetNode[]): void {
  const { book, placer, room } = run;
  const tick = placeTick({
    book,
    placer,
    tasks: run.options.tasks,
    nodes,
    room,
    now,
    deadline: now + run.deadlineMs,
  });
  for (const { lease, task, reason } of tick.decisions) {
    run.campaign.placed(lease, now);
    metrics().placements.inc({ kind: reason });
    run.log('job %s → %s (%s)', lease.jobId, lease.peerId, reason);
    void runLease(run, lease, task);
  }
  const stall = stallAfterTick(tick, book.stats().activeJobs, run.noNodeSince, now);
  if (stall.problem !== null) run.lastProblem = stall.problem;
  run.noNodeSince = stall.noNodeSince;
}

/** Backs up jobs silent for much longer than their model's usual progress gap (placement/hedge-tick.ts decides). */
function hedgeStalled(run: Run, now: number, nodes: readonly FleetNode[]): void {
  if (!run.hedger) return;
  const { book, placer, hedger, room, progress, nodeProgress } = run;
  const tasks = run.options.tasks;
  const deadline = now + run.deadlineMs;
  const decisions = hedgeTick({
    book,
    placer,
    hedger,
    tasks,
    nodes,
    room,
    now,
    deadline,
    progress,
    nodeProgress,
  });
  for (const { backup, of: job, task, silentMs } of decisions) {
    run.backups.set(backup.jobId, job.jobId);
    run.campaign.placed(backup, now);
    metrics().placements.inc({ kind: 'hedge' });
    run.log(
      'job %s on %s silent for %d ms: backup %s → %s',
      job.jobId,
      job.peerId,
      silentMs,
      backup.jobId,
      backup.peerId,
    );
    void runLease(run, backup, task);
  }
}

/** Hands a released lease's samples back to the campaign (a backup's go back to the job it backed up). */
function released(run: Run, r: Released | null, why: string): void {
  if (!r) return;
  const of = run.backups.get(r.jobId);
  const goesOn = of === undefined ? undefined : run.book.job(of);
  // A backup that ended while its job goes on: the slots are that job's again.
  if (goesOn) run.campaign.placed({ ...goesOn, samples: run.book.remaining(goesOn.jobId) }, Date.now());
  else run.campaign.released(r.jobId, Date.now());
  run.log(
    'job %s on %s released (%s): %d samples to re-place, %d given up',
    r.jobId,
    r.peerId,
    why,
    r.samples.length,
    r.exhausted.length,
  );
  poke(run);
}

/** Ends a job's lease as a verdict says: blames its node if so, and releases it. */
function releaseAs(run: Run, lease: Lease, verdict: Omit<ReleaseVerdict, 'full'>, why: string): void {
  if (verdict.blame) blame(run, lease.peerId);
  released(run, run.book.release(lease.jobId, verdict.release), why);
}

/** A node failed a job: it cools down (placement/reputation.ts). */
function blame(run: Run, peerId: string): void {
  run.reputation.failure(peerId, Date.now());
}

/**
 * Runs one lease: sends the job, follows its stream, and when the stream breaks after the worker
 * took the job, keeps the lease (the job goes on at the worker) and re-attaches with the samples
 * still missing, until the lease lapses (`leaseMs` after the break: the main loop's `expire`) or
 * the worker is plainly gone (its address refuses connections and it left the fleet view).
 */
async function runLease(run: Run, lease: Lease, task: Task): Promise<void> {
  const abort = new AbortController();
  const onCancel = () => abort.abort(new Error('cancelled'));
  run.streams.set(lease.jobId, abort);
  run.leases.set(lease.jobId, lease);
  run.progress.set(lease.jobId, { at: Date.now(), scored: 0 });
  run.options.signal?.addEventListener('abort', onCancel, { once: true });
  try {
    await followLease(run, lease, task, abort.signal);
  } finally {
    run.options.signal?.removeEventListener('abort', onCancel);
    run.streams.delete(lease.jobId);
    run.leases.delete(lease.jobId);
    run.progress.delete(lease.jobId);
    poke(run);
  }
}

/** Sends the job, then re-attaches after each stream break, until it is over, released, or its worker gone. */
async function followLease(run: Run, lease: Lease, task: Task, signal: AbortSignal): Promise<void> {
  const self = lease.peerId === run.options.peerId;
  const at: Attachment = { accepted: false, detachedAt: null, pause: REATTACH_MIN_MS };
  const onAccepted = () => reattached(run, lease, at);
  for (let attempt = 0; ; attempt++) {
    const samples = attempt === 0 ? [...lease.samples] : run.book.remaining(lease.jobId);
    if (!run.book.job(lease.jobId) || samples.length === 0) return;
    const events = submitJob(
      run.options.host,
      peerIdFromString(lease.peerId),
      jobRequest(run, lease, task, samples),
      {
        signal,
        ...(self ? { open: async (stream: AbortSignal) => localStream(run, stream) } : {}),
      },
    );
    const lost = await consume(run, lease, events, onAccepted);
    // Over (end, refusal), or released meanwhile (lease lapsed, done by a late result elsewhere).
    if (!lost || !run.book.job(lease.jobId)) return;
    const verdict = lostVerdict({ cause: lost.cause, aborted: signal.aborted, accepted: at.accepted, self });
    if (!holdLease(run, lease, lost, verdict, at)) return;
    await wait(at.pause, signal);
    at.pause = nextReattachPause(at.pause);
  }
}

/** A job stream to this node's own executor, reset when the job client gives it up (as a libp2p stream is). */
function localStream(run: Run, stream: AbortSignal): Framed<WorkerMessage, SubmitterMessage> {
  const wire = run.options.local();
  stream.addEventListener('abort', () => wire.abort(stream.reason as Error), { once: true });
  return wire;
}

/** The job request for `samples` of a lease. */
function jobRequest(run: Run, lease: Lease, task: Task, samples: number[]): JobRequest {
  const { spec } = run.campaign;
  return {
    type: 'job',
    jobId: lease.jobId,
    campaign: run.campaign.name,
    task,
    model: lease.model,
    k: spec.k,
    samples,
    sampling: spec.sampling,
    deadlineMs: run.deadlineMs,
    submitter: run.options.peerId,
    leaseMs: run.leaseMs,
    beats: true,
  };
}

/** The worker accepted the job: after a stream break, the job is attached again and its deadline extended. */
function reattached(run: Run, lease: Lease, at: Attachment): void {
  at.accepted = true;
  if (at.detachedAt === null) return;
  run.log('job %s: re-attached to %s after %d ms', lease.jobId, lease.peerId, Date.now() - at.detachedAt);
  at.detachedAt = null;
  at.pause = REATTACH_MIN_MS;
  run.book.extend(lease.jobId, Date.now() + run.deadlineMs);
}

/**
 * Executes the verdict on a lost stream (placement/job-fate.ts): releases the job (cancelled, lost,
 * or its worker gone), or holds its lease while the worker goes on with it. True to re-attach.
 */
function holdLease(run: Run, lease: Lease, lost: Lost, verdict: LostVerdict, at: Attachment): boolean {
  if (verdict.kind === 'cancelled') {
    releaseAs(run, lease, { release: 'cancelled', blame: false }, 'cancelled');
    return false;
  }
  if (verdict.kind === 'lost') {
    run.log('job %s on %s lost (%s): %s', lease.jobId, lease.peerId, lost.cause, lost.message);
    run.lastProblem = `${lease.peerId.slice(-8)}: job lost (${lost.cause}: ${lost.message})`;
    releaseAs(run, lease, { release: verdict.release, blame: true }, lost.cause);
    return false;
  }
  // The worker took the job and the stream broke: the job goes on there. Hold the lease.
  detached(run, lease, lost, at);
  if (verdict.checkGone && !run.options.nodes().some((n) => n.advert.peerId === lease.peerId)) {
    run.log('job %s: %s is gone (nothing listens at its addresses, no adverts)', lease.jobId, lease.peerId);
    releaseAs(run, lease, { release: 'disconnected', blame: true }, 'worker gone');
    return false;
  }
  return true;
}

/** A job's stream broke while the worker goes on with it: on the first break, its lease is held `leaseMs`. */
function detached(run: Run, lease: Lease, lost: Lost, at: Attachment): void {
  if (at.detachedAt !== null) return;
  const now = Date.now();
  at.detachedAt = now;
  run.book.extend(lease.jobId, detachedDeadline(run.book.job(lease.jobId)!.deadline, now, run.leaseMs));
  run.log('job %s: stream to %s lost (%s); re-attaching', lease.jobId, lease.peerId, lost.message);
  run.lastProblem = `${lease.peerId.slice(-8)}: job stream lost, re-attaching (${lost.cause})`;
}

/**
 * Feeds one job stream's events into the lease book and the campaign. Returns the `lost` event
 * if the stream ended without the worker's `end` (the caller decides: release or re-attach), null
 * when the job is over (done, failed, refused: its lease is released here).
 */
async function consume(
  run: Run,
  lease: Lease,
  events: AsyncIterable<JobEvent>,
  onAccepted: () => void,
): Promise<Lost | null> {
  for await (const ev of events) {
    if (ev.type === 'lost') return ev;
    if (ev.type === 'generated' || ev.type === 'sample') progressed(run, lease, ev.type === 'sample');
    if (ev.type === 'accepted') onAccepted();
    else if (ev.type === 'scoring') heartbeat(run, lease);
    else if (ev.type === 'refused') refused(run, lease, ev.reason, ev.message);
    else if (ev.type === 'generated') generated(run, lease, ev.progress);
    else if (ev.type === 'sample') scored(run, lease, ev.result);
    else if (ev.type === 'end') ended(run, lease, ev.end);
    if (ev.type === 'generated' || ev.type === 'end') reportedLoad(run, lease.peerId, ev);
  }
  return null;
}

/** A job sent progress: the gap since its last progress is a measurement for the hedger. */
function progressed(run: Run, lease: Lease, scored: boolean): void {
  const now = Date.now();
  const p = run.progress.get(lease.jobId);
  if (!p) return;
  run.hedger?.gap(lease.model, now - p.at);
  p.at = now;
  run.nodeProgress.set(lease.peerId, now);
  if (scored) {
    p.scored++;
    run.delivered.add(lease.peerId);
  }
}

/** Its samples are in the sandbox: the hedger waits longer (placement/hedge.ts beatGraceMs). */
function heartbeat(run: Run, lease: Lease): void {
  const p = run.progress.get(lease.jobId);
  if (p) p.beatAt = Date.now();
}

/** The worker refused the job: back-pressure (wait for its next advert, try again) or its failure. */
function refused(run: Run, lease: Lease, reason: string, message: string): void {
  run.log('job %s refused by %s: %s (%s)', lease.jobId, lease.peerId, reason, message);
  const verdict = refusalVerdict(reason);
  if (verdict.full) run.pressure.full(lease.peerId, Date.now());
  else run.lastProblem = `${lease.peerId.slice(-8)} refused a job: ${reason} (${message})`;
  releaseAs(run, lease, verdict, reason);
}

/**
 * The worker's load as of its message: a slot its job freed (last sample generated, job over) is
 * seen now, not at its next advert, and the next placement round starts at once.
 */
function reportedLoad(
  run: Run,
  peerId: string,
  ev: { type: 'generated'; progress: SampleGenerated } | { type: 'end'; end: JobEnd },
): void {
  const load = ev.type === 'generated' ? ev.progress.load : ev.end.load;
  if (!load) return;
  const last = run.reported.get(peerId);
  if (!last || load.at >= last.at) run.reported.set(peerId, load);
  // `generated` already started a round (generated()); an `end` starts one here.
  if (ev.type === 'end') poke(run);
}

/** A sample was generated: the campaign records it, the job's deadline moves. */
function generated(run: Run, lease: Lease, progress: SampleGenerated): void {
  run.campaign.generated(lease.taskId, lease.model, lease.peerId, progress, Date.now());
  run.book.extend(lease.jobId, Date.now() + run.deadlineMs);
  // The job's last sample to generate frees its node's job slot while it scores (placement/room.ts).
  run.book.generated(lease.jobId, progress.index);
  poke(run);
}

/** A scored sample: counted once in the lease book, stored, and measured for the node's throughput. */
function scored(run: Run, lease: Lease, r: SampleResult): void {
  const outcome = run.book.result(lease.jobId, r.index);
  if (outcome.status === 'accepted' || outcome.status === 'duplicate') {
    run.campaign.result(lease.taskId, lease.model, lease.peerId, r, Date.now());
  }
  run.reputation.success(lease.peerId, Date.now());
  run.book.extend(lease.jobId, Date.now() + run.deadlineMs);
  run.throughput.record(lease.peerId, lease.model, {
    promptTokens: r.usage.prompt,
    cachedTokens: r.usage.cached ?? 0,
    completionTokens: r.usage.completion,
    latencyMs: r.latencyMs,
  });
  if (outcome.otherJobDone) doneElsewhere(run, outcome.otherJobDone, lease);
  if (outcome.status === 'accepted' && outcome.jobDone) awaitEnd(run, lease.jobId);
  poke(run);
}

/**
 * Every sample of a job is in, so its worker's `end` is due. A worker that never sends it, and keeps
 * the stream open, must not hold the stream (or the campaign's end, which waits for its streams)
 * for ever: after endGraceMs the stream is cancelled, and reset if the worker ignores that too.
 */
function awaitEnd(run: Run, jobId: string): void {
  const abort = run.streams.get(jobId);
  if (!abort) return;
  const why = new Error(`no end within ${run.endGraceMs} ms of the job's last sample`);
  setTimeout(() => abort.abort(why), run.endGraceMs).unref();
}

/** The worker ended the job: a failure releases it (its node blamed unless it was cancelled). */
function ended(run: Run, lease: Lease, end: JobEnd): void {
  if (end.status !== 'failed') return;
  run.log('job %s on %s failed: %s (%s)', lease.jobId, lease.peerId, end.reason, end.message);
  run.lastProblem = `${lease.peerId.slice(-8)}: job failed (${end.reason}: ${end.message})`;
  releaseAs(run, lease, failedJobVerdict(end.reason), end.reason);
}

/**
 * Job `jobId` was finished by `by`'s results: its stream ends. When `by` was its backup and the job
 * sent no scored sample, its node took work and sat on it: that counts as its failure.
 */
function doneElsewhere(run: Run, jobId: string, by: Lease): void {
  const peer = run.leases.get(jobId)?.peerId;
  if (peer && satOnJob(jobId, run.backups.get(by.jobId), run.progress.get(jobId)?.scored ?? 0)) {
    run.log('job %s: its backup on %s finished it while %s scored nothing', jobId, by.peerId, peer);
    run.lastProblem = `${peer.slice(-8)} took a job and scored nothing; its backup finished it`;
    blame(run, peer);
  }
  run.streams.get(jobId)?.abort(new Error('done elsewhere'));
}
