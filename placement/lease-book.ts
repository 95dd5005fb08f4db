import type { NodeOutstanding } from './eligibility.ts';

export interface LeaseBookOptions {
  /** Placements one (task, model) may have; after the last is released its remaining samples are given up (default 5). */
  maxAttempts?: number;
}

/** Why a job's lease ended before all its samples came back. */
export type ReleaseCause = 'refused' | 'busy' | 'failed' | 'disconnected' | 'deadline' | 'cancelled';

/** A job: the samples of one (task, model) leased to one node until a deadline. */
export interface Lease {
  /** Deterministic job id: task id, model and attempt number. */
  jobId: string;
  taskId: string;
  model: string;
  /** 1 for the first placement of this (task, model), 2 for the first re-placement, ... */
  attempt: number;
  peerId: string;
  /** Sample indices this job was asked for. */
  samples: readonly number[];
  /** When the lease was granted, ms since epoch. */
  leasedAt: number;
  /** When the lease lapses unless extended, ms since epoch. */
  deadline: number;
  /** For a backup job (`hedge`), the job whose samples it runs too; absent for a placement. */
  backupOf?: string;
}

/** What a lease's end hands back to the submitter. */
export interface Released {
  jobId: string;
  taskId: string;
  model: string;
  peerId: string;
  cause: ReleaseCause;
  /** Samples of the job still unfinished: pending again, to re-place (empty if given up). */
  samples: number[];
  /** Unfinished samples given up because the (task, model) used all its attempts. */
  exhausted: number[];
}

/** Outcome of one sample result. */
export interface ResultOutcome {
  /**
   * `accepted`: first result for the sample (also from a job whose lease already ended: the
   * sample is valid work and is not re-placed again); `duplicate`: the sample was already done;
   * `unknown-job`: no such job; `not-in-job`: the job was not asked for that sample.
   */
  status: 'accepted' | 'duplicate' | 'unknown-job' | 'not-in-job';
  /** True when this result finished the job (all its samples done); its lease is then closed. */
  jobDone: boolean;
  /** Id of another active job this result finished (a late result from an ended lease did its last sample), or null. */
  otherJobDone: string | null;
}

/** Work waiting for a node. */
export interface PendingWork {
  taskId: string;
  model: string;
  /** Pending sample indices, ascending. */
  samples: number[];
  /** Placements so far. */
  attempts: number;
}

/** Sample counts; every planned sample is in exactly one of pending, leased, done, exhausted. */
export interface LeaseStats {
  planned: number;
  pending: number;
  leased: number;
  done: number;
  exhausted: number;
  /** Jobs holding a lease now. */
  activeJobs: number;
}

/**
 * The submitter's lease bookkeeping, pure: which samples of which (task, model) are pending,
 * leased to which node until when, done or given up. The submitter wires it to I/O: it `lease`s
 * pending work to the node the placer chose, feeds each sample `result` back, and calls `release`
 * (refusal, failure), `disconnect` (peer gone) or `expire` (deadlines) to get the unfinished samples
 * to re-place. A sample is never lost (it is always pending, leased, done or exhausted) nor counted
 * twice (a second result for it is a `duplicate`).
 */
export interface LeaseBook {
  /**
   * Adds samples to generate for (task, model); samples already known are ignored. Returns how many
   * were added. A resumed campaign adds only its unfinished samples and passes the placements made
   * before the restart as `previousAttempts`, so job ids do not repeat and the attempt limit holds.
   */
  add(taskId: string, model: string, samples: Iterable<number>, previousAttempts?: number): number;
  /** Leases every pending sample of (task, model) to `peerId` as one job; null when none is pending or a job is active. */
  lease(taskId: string, model: string, peerId: string, now: number, deadline: number): Lease | null;
  /**
   * Leases a backup of active job `jobId` to another peer: the job's unfinished samples run on both
   * and the first result of each counts. Neither job re-places anything: when the job fails or lapses,
   * its backup takes its samples over; when the backup does, the job goes on alone. Null when the job
   * is not active, is itself a backup, already has one, has nothing left, or `peerId` is its own
   * peer. A backup does not use up one of the (task, model)'s `maxAttempts`.
   */
  hedge(jobId: string, peerId: string, now: number, deadline: number): Lease | null;
  /**
   * Records that active job `jobId` generated `sample` (it is being scored). Returns true when that
   * was the job's last sample to generate: it then counts as generating no more in `outstanding()`.
   */
  generated(jobId: string, sample: number): boolean;
  /** Records a sample result reported by job `jobId` (the sample was generated too). */
  result(jobId: string, sample: number): ResultOutcome;
  /** Ends an active job's lease; its unfinished samples become pending (or exhausted). Null if not active. */
  release(jobId: string, cause: ReleaseCause): Released | null;
  /** Releases every active job on a peer that disconnected. */
  disconnect(peerId: string): Released[];
  /** Releases every active job whose deadline is at or before `now`. */
  expire(now: number): Released[];
  /** Moves an active job's deadline (progress seen); false if the job is not active. */
  extend(jobId: string, deadline: number): boolean;
  /** An active job. */
  job(jobId: string): Lease | undefined;
  /** Active jobs, in lease order. */
  jobs(): Lease[];
  /** Unfinished samples of an active job, ascending. */
  remaining(jobId: string): number[];
  /** Work waiting for placement, in the order it was added. */
  pending(): PendingWork[];
  /**
   * The (task, model)s of `pending()`, in the same order, lazily: each step costs O(log n), whatever
   * is done meanwhile (leasing what was yielded is fine), so a caller that stops early never pays for
   * the whole queue.
   */
  waiting(): Iterable<{ taskId: string; model: string }>;
  /** Peers that refused or failed (task, model), for the placer's `exclude`. */
  refusedBy(taskId: string, model: string): string[];
  /** Active jobs (of them, those still generating) and their models per peer: the placer's `outstanding`. */
  outstanding(): Map<string, NodeOutstanding>;
  /** Earliest deadline among active jobs, or null: when to call `expire` next. */
  nextDeadline(): number | null;
  stats(): LeaseStats;
  /** True when no sample is pending or leased. */
  readonly complete: boolean;
}

type SampleState =
  | { state: 'pending' }
  | { state: 'leased'; jobId: string }
  | { state: 'done' }
  | { state: 'exhausted' };

interface Work {
  /** Order of addition: the pending queue's order. */
  seq: number;
  /** Samples in state pending. */
  pendingCount: number;
  /** True while the work is in the pending queue (no active job, some sample pending). */
  queued: boolean;
  taskId: string;
  model: string;
  samples: Map<number, SampleState>;
  attempts: number;
  /** Placements released because the node was busy (not counted against maxAttempts). */
  busy: number;
  activeJob: string | null;
  /** The active backup of `activeJob`, if any. */
  backupJob: string | null;
  /** Backups leased (they take job ids but not attempts). */
  hedges: number;
  refusedBy: Set<string>;
}

interface Job extends Lease {
  /** Samples of this job not yet reported. */
  open: Set<number>;
  /** Samples of this job neither generated nor done: while any is left, the job is generating. */
  ungenerated: Set<number>;
  active: boolean;
  /** The job its samples are leased under: itself, or for a backup the job it backs up. */
  owner: string;
}

function workKey(taskId: string, model: string): string {
  return JSON.stringify([taskId, model]);
}

export function createLeaseBook(options: LeaseBookOptions = {}): LeaseBook {
  const maxAttempts = options.maxAttempts ?? 5;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new RangeError(`maxAttempts must be a positive integer, got ${maxAttempts}`);
  const works = new Map<string, Work>();
  /** Every job ever leased (active or not), so late results still count. */
  const allJobs = new Map<string, Job>();
  const active = new Map<string, Job>();
  const counts = { planned: 0, pending: 0, leased: 0, done: 0, exhausted: 0 };
  /** Works waiting for placement, by `seq`: kept as states change, so `pending()` never scans done work. */
  const queue: Work[] = [];
  /** Active jobs per peer, how many generate and how many per model: `outstanding()` without a scan. */
  const perPeer = new Map<string, { jobs: number; generating: number; models: Map<string, number> }>();

  /** Index of the first work in `queue` whose seq is greater than `seq`. */
  const after = (seq: number): number => {
    let lo = 0;
    let hi = queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (queue[mid]!.seq <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };

  /** Puts a work in or out of the pending queue after its samples or its active job changed. */
  const sync = (work: Work) => {
    const waiting = work.activeJob === null && work.pendingCount > 0;
    if (waiting === work.queued) return;
    work.queued = waiting;
    if (waiting) queue.splice(after(work.seq), 0, work);
    else queue.splice(after(work.seq) - 1, 1);
  };

  const setState = (work: Work, sample: number, next: SampleState) => {
    const prev = work.samples.get(sample);
    if (prev) counts[prev.state]--;
    counts[next.state]++;
    if (prev?.state === 'pending') work.pendingCount--;
    if (next.state === 'pending') work.pendingCount++;
    work.samples.set(sample, next);
    sync(work);
  };

  /** Counts an active job in (+1) or out (-1) of its peer's outstanding work. */
  const track = (job: Job, delta: 1 | -1) => {
    let entry = perPeer.get(job.peerId);
    if (!entry) {
      entry = { jobs: 0, generating: 0, models: new Map() };
      perPeer.set(job.peerId, entry);
    }
    entry.jobs += delta;
    if (job.ungenerated.size > 0) entry.generating += delta;
    const n = (entry.models.get(job.model) ?? 0) + delta;
    if (n > 0) entry.models.set(job.model, n);
    else entry.models.delete(job.model);
    if (entry.jobs === 0) perPeer.delete(job.peerId);
  };

  const snapshot = (job: Job): Lease => ({
    jobId: job.jobId,
    taskId: job.taskId,
    model: job.model,
    attempt: job.attempt,
    peerId: job.peerId,
    samples: job.samples,
    leasedAt: job.leasedAt,
    deadline: job.deadline,
    ...(job.owner !== job.jobId ? { backupOf: job.owner } : {}),
  });

  /** `sample` of `job` needs generating no more; true when that ends the active job's generation. */
  const markGenerated = (job: Job, sample: number): boolean => {
    if (!job.ungenerated.delete(sample) || job.ungenerated.size > 0 || !job.active) return false;
    perPeer.get(job.peerId)!.generating--;
    return true;
  };

  const close = (job: Job) => {
    job.active = false;
    active.delete(job.jobId);
    track(job, -1);
    const work = works.get(workKey(job.taskId, job.model))!;
    if (work.activeJob === job.jobId) work.activeJob = null;
    if (work.backupJob === job.jobId) work.backupJob = null;
    sync(work);
  };

  const pendingSamples = (work: Work): number[] =>
    [...work.samples]
      .filter(([, s]) => s.state === 'pending')
      .map(([i]) => i)
      .sort((a, b) => a - b);

  /** Samples of a job still leased to it. */
  const waitingOn = (job: Job): number[] => {
    const work = works.get(workKey(job.taskId, job.model))!;
    return [...job.open]
      .filter((s) => {
        const st = work.samples.get(s)!;
        return st.state === 'leased' && st.jobId === job.owner;
      })
      .sort((a, b) => a - b);
  };

  /** Closes an active job none of whose samples is still leased to it; true if it closed. */
  const closeIfDone = (job: Job): boolean => {
    if (waitingOn(job).length > 0) return false;
    close(job);
    return true;
  };

  /** The samples of a job that ended go to its active backup, which becomes the job. */
  const handOver = (job: Job, work: Work, backup: Job): number[] => {
    const moved = waitingOn(job);
    for (const sample of moved) setState(work, sample, { state: 'leased', jobId: backup.jobId });
    backup.owner = backup.jobId;
    work.activeJob = backup.jobId;
    work.backupJob = null;
    sync(work);
    return moved;
  };

  const release = (jobId: string, cause: ReleaseCause): Released | null => {
    const job = active.get(jobId);
    if (!job) return null;
    const work = works.get(workKey(job.taskId, job.model))!;
    const backup = work.activeJob === jobId && work.backupJob ? active.get(work.backupJob) : undefined;
    close(job);
    if (cause === 'refused' || cause === 'failed') work.refusedBy.add(job.peerId);
    // A backup that ends, or a job whose backup goes on with its samples, puts nothing back to place.
    const idle = {
      jobId,
      taskId: job.taskId,
      model: job.model,
      peerId: job.peerId,
      cause,
      samples: [],
      exhausted: [],
    };
    if (job.owner !== jobId) return idle;
    if (backup) {
      handOver(job, work, backup);
      return idle;
    }
    // A busy node (all its slots taken, e.g. by another submitter) is back-pressure, not a failure:
    // it neither excludes the node nor uses up an attempt.
    if (cause === 'busy') work.busy++;
    const giveUp = cause !== 'busy' && work.attempts - work.busy - work.hedges >= maxAttempts;
    const back: number[] = [];
    for (const sample of [...job.open].sort((a, b) => a - b)) {
      const state = work.samples.get(sample)!;
      if (state.state !== 'leased' || state.jobId !== jobId) continue;
      setState(work, sample, giveUp ? { state: 'exhausted' } : { state: 'pending' });
      back.push(sample);
    }
    return {
      jobId,
      taskId: job.taskId,
      model: job.model,
      peerId: job.peerId,
      cause,
      samples: giveUp ? [] : back,
      exhausted: giveUp ? back : [],
    };
  };

  const checkTime = (name: string, t: number) => {
    if (!Number.isFinite(t)) throw new RangeError(`${name} must be a finite number of ms, got ${t}`);
  };

  return {
    add(taskId, model, samples, previousAttempts = 0) {
      if (!Number.isInteger(previousAttempts) || previousAttempts < 0)
        throw new RangeError(`previousAttempts must be a non-negative integer, got ${previousAttempts}`);
      const key = workKey(taskId, model);
      let work = works.get(key);
      if (!work) {
        work = {
          seq: works.size,
          pendingCount: 0,
          queued: false,
          taskId,
          model,
          samples: new Map(),
          attempts: 0,
          busy: 0,
          activeJob: null,
          backupJob: null,
          hedges: 0,
          refusedBy: new Set(),
        };
        works.set(key, work);
      }
      work.attempts = Math.max(work.attempts, previousAttempts);
      let added = 0;
      for (const sample of samples) {
        if (!Number.isInteger(sample) || sample < 0)
          throw new RangeError(`sample index must be a non-negative integer, got ${sample}`);
        if (work.samples.has(sample)) continue;
        counts.planned++;
        setState(work, sample, { state: 'pending' });
        added++;
      }
      return added;
    },
    lease(taskId, model, peerId, now, deadline) {
      checkTime('now', now);
      checkTime('deadline', deadline);
      const work = works.get(workKey(taskId, model));
      if (!work || work.activeJob !== null) return null;
      const samples = pendingSamples(work);
      if (samples.length === 0) return null;
      work.attempts++;
      const jobId = `${taskId}#${model}#${work.attempts}`;
      const job: Job = {
        jobId,
        taskId,
        model,
        attempt: work.attempts,
        peerId,
        samples,
        leasedAt: now,
        deadline,
        open: new Set(samples),
        ungenerated: new Set(samples),
        active: true,
        owner: jobId,
      };
      for (const sample of samples) setState(work, sample, { state: 'leased', jobId });
      work.activeJob = jobId;
      sync(work);
      allJobs.set(jobId, job);
      active.set(jobId, job);
      track(job, 1);
      return snapshot(job);
    },
    hedge(jobId, peerId, now, deadline) {
      checkTime('now', now);
      checkTime('deadline', deadline);
      const job = active.get(jobId);
      if (!job || job.owner !== jobId || job.peerId === peerId) return null;
      const work = works.get(workKey(job.taskId, job.model))!;
      const samples = waitingOn(job);
      if (work.backupJob !== null || samples.length === 0) return null;
      work.attempts++;
      work.hedges++;
      const backup: Job = {
        jobId: `${job.taskId}#${job.model}#${work.attempts}`,
        taskId: job.taskId,
        model: job.model,
        attempt: work.attempts,
        peerId,
        samples,
        leasedAt: now,
        deadline,
        open: new Set(samples),
        ungenerated: new Set(samples),
        active: true,
        owner: jobId,
      };
      work.backupJob = backup.jobId;
      allJobs.set(backup.jobId, backup);
      active.set(backup.jobId, backup);
      track(backup, 1);
      return snapshot(backup);
    },
    result(jobId, sample) {
      const job = allJobs.get(jobId);
      if (!job) return { status: 'unknown-job', jobDone: false, otherJobDone: null };
      if (!job.samples.includes(sample)) return { status: 'not-in-job', jobDone: false, otherJobDone: null };
      const work = works.get(workKey(job.taskId, job.model))!;
      const state = work.samples.get(sample)!;
      let status: ResultOutcome['status'];
      if (state.state === 'done') status = 'duplicate';
      else {
        // Pending, leased (to this or a later job) or even exhausted: a real result counts once.
        setState(work, sample, { state: 'done' });
        status = 'accepted';
      }
      job.open.delete(sample);
      markGenerated(job, sample);
      const jobDone = job.active && closeIfDone(job);
      // The sample may finish another active job that ran it: the one it was leased to (this one's
      // lease had ended, or this is its backup), or this job's backup.
      let otherJobDone: string | null = null;
      const others = new Set([state.state === 'leased' ? state.jobId : null, work.activeJob, work.backupJob]);
      for (const id of others) {
        const other = id && id !== jobId ? active.get(id) : undefined;
        if (!other?.open.has(sample)) continue;
        other.open.delete(sample);
        markGenerated(other, sample);
        if (closeIfDone(other)) otherJobDone = other.jobId;
      }
      return { status, jobDone, otherJobDone };
    },
    generated(jobId, sample) {
      const job = active.get(jobId);
      return job ? markGenerated(job, sample) : false;
    },
    release,
    disconnect(peerId) {
      const out: Released[] = [];
      for (const job of [...active.values()])
        if (job.peerId === peerId) out.push(release(job.jobId, 'disconnected')!);
      return out;
    },
    expire(now) {
      checkTime('now', now);
      const out: Released[] = [];
      for (const job of [...active.values()])
        if (job.deadline <= now) out.push(release(job.jobId, 'deadline')!);
      return out;
    },
    extend(jobId, deadline) {
      checkTime('deadline', deadline);
      const job = active.get(jobId);
      if (!job) return false;
      job.deadline = deadline;
      return true;
    },
    job(jobId) {
      const job = active.get(jobId);
      return job ? snapshot(job) : undefined;
    },
    jobs() {
      return [...active.values()].map(snapshot);
    },
    remaining(jobId) {
      const job = active.get(jobId);
      return job ? waitingOn(job) : [];
    },
    pending() {
      return queue.map((work) => ({
        taskId: work.taskId,
        model: work.model,
        samples: pendingSamples(work),
        attempts: work.attempts,
      }));
    },
    *waiting() {
      let seq = -1;
      for (;;) {
        const work = queue[after(seq)];
        if (!work) return;
        seq = work.seq;
        yield { taskId: work.taskId, model: work.model };
      }
    },
    refusedBy(taskId, model) {
      return [...(works.get(workKey(taskId, model))?.refusedBy ?? [])].sort();
    },
    outstanding() {
      const map = new Map<string, NodeOutstanding>();
      for (const [peerId, entry] of perPeer)
        map.set(peerId, { jobs: entry.jobs, generating: entry.generating, models: [...entry.models.keys()] });
      return map;
    },
    nextDeadline() {
      let next: number | null = null;
      for (const job of active.values()) if (next === null || job.deadline < next) next = job.deadline;
      return next;
    },
    stats() {
      return { ...counts, activeJobs: active.size };
    },
    get complete() {
      return counts.pending === 0 && counts.leased === 0;
    },
  };
}
