import { peerIdFromString } from '@libp2p/peer-id';
import type { FleetNode } from '../../placement/fleet-view.ts';
import { createHedger, type HedgeOptions } from '../../placement/hedge.ts';
import { createLeaseBook, type Lease, type Released } from '../../placement/lease-book.ts';
import { createPlacer } from '../../placement/placer.ts';
import { createReputation } from '../../placement/reputation.ts';
import { createBackPressure, withRoom } from '../../placement/room.ts';
import { createThroughput } from '../../placement/throughput.ts';
import { placeTick, type RoomState, roomContext } from '../../placement/tick.ts';
import {
  DEFAULT_JOB_LEASE_MS,
  type JobRequest,
  type SubmitterMessage,
  type WorkerMessage,
} from '../../protocol/job.ts';
import type { Task } from '../../protocol/task.ts';
import { sleep, pause as wait } from '../async/sleep.ts';
import { logger } from '../logger.ts';
import { metrics } from '../metrics.ts';
import type { Framed } from '../wire/framed.ts';
import type { StreamHost } from '../wire/streams.ts';
import type { Campaign } from './campaign-store.ts';
import { type JobEvent, submitJob } from './job-client.ts';

/** First pause before re-attaching to a job whose stream broke, ms; it doubles up to REATTACH_MAX_MS. */
const REATTACH_MIN_MS = 500;
const REATTACH_MAX_MS = 5000;

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

/**
 * The submitter: places each (task, model)'s samples as one job on the node the placer picks (warm
 * first, then bounded-load rendezvous), streams results into the campaign store, and re-places the
 * unfinished samples of a job whose worker refuses, fails or misses its deadline. A job whose stream
 * breaks is not re-placed at once: the worker goes on with it and the submitter re-attaches; only a
 * lease that lapses (`leaseMs` without a stream) or a worker that is plainly gone re-places it.
 */
export function runCampaign(options: CampaignRunnerOptions): CampaignRunner {
  const log = logger('vtnode:submitter');
  const { campaign } = options;
  const deadlineMs = options.jobDeadlineMs ?? 30 * 60_000;
  const leaseMs = options.leaseMs ?? DEFAULT_JOB_LEASE_MS;
  const reputation = createReputation();
  const throughput = createThroughput();
  const placer = createPlacer({ reputation, weight: throughput.weight, epsilon: options.epsilon ?? 0.1 });
  const book = createLeaseBook({ maxAttempts: options.maxAttempts ?? 5 });
  const hedger = options.hedge === false ? null : createHedger(options.hedge);
  const streams = new Map<string, AbortController>();
  /** Per running job: its last progress and heartbeat (ms since epoch) and how many scored samples it sent. */
  const progress = new Map<string, { at: number; beatAt?: number; scored: number }>();
  /** peerId → its last progress on any job (the hedger counts a node's silence, not a job's). */
  const nodeProgress = new Map<string, number>();
  /** Backup job id → the job it backs up. */
  const backups = new Map<string, string>();
  /** Nodes that returned a scored sample (out of probation). */
  const delivered = options.proven ?? new Set<string>();
  /** Running jobs' leases, by job id. */
  const leases = new Map<string, Lease>();
  const pressure = createBackPressure();
  const room: RoomState = { selfPeerId: options.peerId, proven: delivered, busyUntil: pressure.busyUntil };
  let lastProblem: string | null = null;
  let noNodeSince: number | null = null;
  let wake: (() => void) | null = null;
  const poke = () => {
    wake?.();
    options.onProgress?.();
  };

  for (const p of campaign.pending()) book.add(p.taskId, p.model, p.samples, p.attempts);

  function released(r: Released | null, why: string): void {
    if (!r) return;
    const of = backups.get(r.jobId);
    const goesOn = of === undefined ? undefined : book.job(of);
    // A backup that ended while its job goes on: the slots are that job's again.
    if (goesOn) campaign.placed({ ...goesOn, samples: book.remaining(goesOn.jobId) }, Date.now());
    else campaign.released(r.jobId, Date.now());
    log(
      'job %s on %s released (%s): %d samples to re-place, %d given up',
      r.jobId,
      r.peerId,
      why,
      r.samples.length,
      r.exhausted.length,
    );
    poke();
  }

  function failure(peerId: string): void {
    reputation.failure(peerId, Date.now());
  }

  /** A job sent progress: the gap since its last progress is a measurement for the hedger. */
  function progressed(lease: Lease, scored: boolean): void {
    const now = Date.now();
    const p = progress.get(lease.jobId);
    if (!p) return;
    hedger?.gap(lease.model, now - p.at);
    p.at = now;
    nodeProgress.set(lease.peerId, now);
    if (scored) {
      p.scored++;
      delivered.add(lease.peerId);
    }
  }

  /**
   * Job `jobId` was finished by `by`'s results: its stream ends. When `by` was its backup and the job
   * sent no scored sample, its node took work and sat on it: that counts as its failure.
   */
  function doneElsewhere(jobId: string, by: Lease): void {
    const silent = (progress.get(jobId)?.scored ?? 0) === 0;
    const peer = leases.get(jobId)?.peerId;
    if (backups.get(by.jobId) === jobId && silent && peer) {
      log('job %s: its backup on %s finished it while %s scored nothing', jobId, by.peerId, peer);
      lastProblem = `${peer.slice(-8)} took a job and scored nothing; its backup finished it`;
      failure(peer);
    }
    streams.get(jobId)?.abort(new Error('done elsewhere'));
  }

  /**
   * Feeds one job stream's events into the lease book and the campaign. Returns the `lost` event
   * if the stream ended without the worker's `end` (the caller decides: release or re-attach), null
   * when the job is over (done, failed, refused: its lease is released here).
   */
  async function consume(
    lease: Lease,
    events: AsyncIterable<JobEvent>,
    onAccepted: () => void,
  ): Promise<Extract<JobEvent, { type: 'lost' }> | null> {
    for await (const ev of events) {
      if (ev.type === 'generated' || ev.type === 'sample') progressed(lease, ev.type === 'sample');
      if (ev.type === 'accepted') onAccepted();
      else if (ev.type === 'scoring') {
        // Its samples are in the sandbox: the hedger waits longer (placement/hedge.ts beatGraceMs).
        const p = progress.get(lease.jobId);
        if (p) p.beatAt = Date.now();
      } else if (ev.type === 'refused') {
        log('job %s refused by %s: %s (%s)', lease.jobId, lease.peerId, ev.reason, ev.message);
        if (ev.reason === 'full') {
          // Back-pressure (another submitter filled it): wait for its next advert, try again.
          pressure.full(lease.peerId, Date.now());
          released(book.release(lease.jobId, 'busy'), ev.reason);
        } else {
          lastProblem = `${lease.peerId.slice(-8)} refused a job: ${ev.reason} (${ev.message})`;
          failure(lease.peerId);
          released(book.release(lease.jobId, 'refused'), ev.reason);
        }
      } else if (ev.type === 'generated') {
        campaign.generated(lease.taskId, lease.model, lease.peerId, ev.progress, Date.now());
        book.extend(lease.jobId, Date.now() + deadlineMs);
        poke();
      } else if (ev.type === 'sample') {
        const r = ev.result;
        const outcome = book.result(lease.jobId, r.index);
        if (outcome.status === 'accepted' || outcome.status === 'duplicate') {
          campaign.result(lease.taskId, lease.model, lease.peerId, r, Date.now());
        }
        reputation.success(lease.peerId, Date.now());
        book.extend(lease.jobId, Date.now() + deadlineMs);
        throughput.record(lease.peerId, lease.model, {
          promptTokens: r.usage.prompt,
          cachedTokens: r.usage.cached ?? 0,
          completionTokens: r.usage.completion,
          latencyMs: r.latencyMs,
        });
        if (outcome.otherJobDone) doneElsewhere(outcome.otherJobDone, lease);
        poke();
      } else if (ev.type === 'end') {
        const end = ev.end;
        if (end.status === 'failed') {
          log('job %s on %s failed: %s (%s)', lease.jobId, lease.peerId, end.reason, end.message);
          lastProblem = `${lease.peerId.slice(-8)}: job failed (${end.reason}: ${end.message})`;
          if (end.reason !== 'cancelled') failure(lease.peerId);
          released(
            book.release(lease.jobId, end.reason === 'cancelled' ? 'cancelled' : 'failed'),
            end.reason,
          );
        }
      } else if (ev.type === 'lost') return ev;
    }
    return null;
  }

  /**
   * Runs one lease: sends the job, follows its stream, and when the stream breaks after the worker
   * took the job, keeps the lease (the job goes on at the worker) and re-attaches with the samples
   * still missing, until the lease lapses (`leaseMs` after the break: the main loop's `expire`) or
   * the worker is plainly gone (its address refuses connections and it left the fleet view).
   */
  async function runLease(lease: Lease, task: Task): Promise<void> {
    const abort = new AbortController();
    streams.set(lease.jobId, abort);
    leases.set(lease.jobId, lease);
    progress.set(lease.jobId, { at: Date.now(), scored: 0 });
    const onCancel = () => abort.abort(new Error('cancelled'));
    options.signal?.addEventListener('abort', onCancel, { once: true });
    const spec = campaign.spec;
    const request = (samples: number[]): JobRequest => ({
      type: 'job',
      jobId: lease.jobId,
      campaign: campaign.name,
      task,
      model: lease.model,
      k: spec.k,
      samples,
      sampling: spec.sampling,
      deadlineMs,
      submitter: options.peerId,
      leaseMs,
      beats: true,
    });
    const self = lease.peerId === options.peerId;
    let accepted = false;
    let detachedAt: number | null = null;
    let pause = REATTACH_MIN_MS;
    const onAccepted = () => {
      accepted = true;
      if (detachedAt === null) return;
      log('job %s: re-attached to %s after %d ms', lease.jobId, lease.peerId, Date.now() - detachedAt);
      detachedAt = null;
      pause = REATTACH_MIN_MS;
      book.extend(lease.jobId, Date.now() + deadlineMs);
    };
    try {
      for (let attempt = 0; ; attempt++) {
        const samples = attempt === 0 ? [...lease.samples] : book.remaining(lease.jobId);
        if (!book.job(lease.jobId) || samples.length === 0) return;
        const events = submitJob(options.host, peerIdFromString(lease.peerId), request(samples), {
          signal: abort.signal,
          ...(self ? { open: async () => options.local() } : {}),
        });
        const lost = await consume(lease, events, onAccepted);
        // Over (end, refusal), or released meanwhile (lease lapsed, done by a late result elsewhere).
        if (!lost || !book.job(lease.jobId)) return;
        if (lost.cause === 'cancelled' || abort.signal.aborted) {
          released(book.release(lease.jobId, 'cancelled'), 'cancelled');
          return;
        }
        if (lost.cause === 'violation' || !accepted || self) {
          log('job %s on %s lost (%s): %s', lease.jobId, lease.peerId, lost.cause, lost.message);
          lastProblem = `${lease.peerId.slice(-8)}: job lost (${lost.cause}: ${lost.message})`;
          failure(lease.peerId);
          released(
            book.release(lease.jobId, lost.cause === 'violation' ? 'failed' : 'disconnected'),
            lost.cause,
          );
          return;
        }
        // The worker took the job and the stream broke: the job goes on there. Hold the lease.
        const now = Date.now();
        if (detachedAt === null) {
          detachedAt = now;
          book.extend(lease.jobId, Math.min(book.job(lease.jobId)!.deadline, now + leaseMs));
          log('job %s: stream to %s lost (%s); re-attaching', lease.jobId, lease.peerId, lost.message);
          lastProblem = `${lease.peerId.slice(-8)}: job stream lost, re-attaching (${lost.cause})`;
        }
        if (lost.cause === 'no-listener' && !options.nodes().some((n) => n.advert.peerId === lease.peerId)) {
          log('job %s: %s is gone (nothing listens at its addresses, no adverts)', lease.jobId, lease.peerId);
          failure(lease.peerId);
          released(book.release(lease.jobId, 'disconnected'), 'worker gone');
          return;
        }
        await wait(pause, abort.signal);
        pause = Math.min(pause * 2, REATTACH_MAX_MS);
      }
    } finally {
      options.signal?.removeEventListener('abort', onCancel);
      streams.delete(lease.jobId);
      leases.delete(lease.jobId);
      progress.delete(lease.jobId);
      poke();
    }
  }

  /** Backs up jobs silent for much longer than their model's usual progress gap, where a node has room. */
  function hedgeStalled(now: number, nodes: readonly FleetNode[]): void {
    if (!hedger) return;
    const jobs = book.jobs();
    const paired = new Set(jobs.flatMap((j) => (j.backupOf ? [j.jobId, j.backupOf] : [])));
    const watched = jobs.map((j) => ({
      jobId: j.jobId,
      peerId: j.peerId,
      model: j.model,
      lastProgressAt: progress.get(j.jobId)?.at ?? j.leasedAt,
      beatAt: progress.get(j.jobId)?.beatAt,
      nodeProgressAt: nodeProgress.get(j.peerId) ?? 0,
      hedged: paired.has(j.jobId),
    }));
    for (const stalled of hedger.stalled(watched, now)) {
      const job = book.job(stalled.jobId);
      const task = job && options.tasks.get(job.taskId);
      if (!job || !task) continue;
      const exclude = [job.peerId, ...book.refusedBy(job.taskId, job.model)];
      const ctx = roomContext(nodes, book, room, now);
      const p = placer.place({ task, model: job.model, exclude }, nodes, now, ctx.outstanding);
      const target = p.ok ? withRoom(p, ctx) : null;
      if (!target || exclude.includes(target)) continue;
      const backup = book.hedge(job.jobId, target, now, now + deadlineMs);
      if (!backup) continue;
      backups.set(backup.jobId, job.jobId);
      campaign.placed(backup, now);
      metrics().placements.inc({ kind: 'hedge' });
      log(
        'job %s on %s silent for %d ms: backup %s → %s',
        job.jobId,
        job.peerId,
        now - stalled.lastProgressAt,
        backup.jobId,
        target,
      );
      void runLease(backup, task);
    }
  }

  /** One placement round (placement/tick.ts decides; this starts the jobs it leased). */
  function placeAll(now: number, nodes: readonly FleetNode[]): void {
    const tick = placeTick({
      book,
      placer,
      tasks: options.tasks,
      nodes,
      room,
      now,
      deadline: now + deadlineMs,
    });
    for (const { lease, task, reason } of tick.decisions) {
      campaign.placed(lease, now);
      metrics().placements.inc({ kind: reason });
      log('job %s → %s (%s)', lease.jobId, lease.peerId, reason);
      void runLease(lease, task);
    }
    if (tick.blocked && tick.decisions.length === 0 && book.stats().activeJobs === 0) {
      lastProblem = tick.blocked;
      // A node cooling down after failures comes back (and a task's placements are bounded by
      // maxAttempts): only a fleet where no node could ever take the work stalls the campaign.
      noNodeSince = tick.coolingDown ? null : (noNodeSince ?? now);
    } else {
      noNodeSince = null;
    }
  }

  const done = (async (): Promise<CampaignOutcome> => {
    const noNodeTimeout = options.noNodeTimeoutMs ?? 60_000;
    while (!book.complete) {
      if (options.signal?.aborted) break;
      const now = Date.now();
      for (const r of book.expire(now)) {
        streams.get(r.jobId)?.abort(new Error('deadline'));
        failure(r.peerId);
        released(r, 'deadline');
      }
      // The fleet view once per round (the daemon's view sorts its nodes on each call).
      const nodes = options.nodes();
      placeAll(now, nodes);
      hedgeStalled(now, nodes);
      if (noNodeSince !== null && now - noNodeSince > noNodeTimeout) {
        return { status: 'stalled', exhausted: book.stats().exhausted, problem: lastProblem };
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 500);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
    // Let cancelled streams wind down before reporting.
    while (streams.size > 0) await sleep(50);
    if (options.signal?.aborted) {
      campaign.finish('cancelled', Date.now());
      return { status: 'cancelled', exhausted: book.stats().exhausted, problem: lastProblem };
    }
    campaign.finish('done', Date.now());
    return {
      status: 'done',
      exhausted: book.stats().exhausted,
      problem: book.stats().exhausted > 0 ? lastProblem : null,
    };
  })();

  return {
    done,
    running: () =>
      book
        .jobs()
        .map((j) => ({ jobId: j.jobId, taskId: j.taskId, peerId: j.peerId, samples: j.samples.length })),
    problem: () => lastProblem,
  };
}
