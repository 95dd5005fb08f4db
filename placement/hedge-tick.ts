import type { FleetNode } from './fleet-view.ts';
import type { Hedger, WatchedJob } from './hedge.ts';
import type { Lease, LeaseBook } from './lease-book.ts';
import type { PlacementRequest, Placer } from './placer.ts';
import { withRoom } from './room.ts';
import { type RoomState, roomContext } from './tick.ts';

/** What the submitter saw of an active job's progress. */
export interface JobProgress {
  /** Its last progress (placed, generated, scored), ms since epoch. */
  at: number;
  /** Its last `scoring` heartbeat, ms since epoch; absent when none. */
  beatAt?: number;
}

/** One backup the hedge round decided to start. */
export interface HedgeDecision<T> {
  /** The backup's lease (leased in the book). */
  backup: Lease;
  /** The stalled job it backs up. */
  of: Lease;
  task: T;
  /** How long the stalled job had sent no progress, ms. */
  silentMs: number;
}

export interface HedgeTickInput<T extends PlacementRequest['task']> {
  /** The submitter's lease book: the round leases the backups it places. */
  book: LeaseBook;
  /** The placer (placement/placer.ts). */
  placer: Placer;
  /** The hedger (placement/hedge.ts): which jobs are stalled. */
  hedger: Hedger;
  /** Tasks by id. */
  tasks: ReadonlyMap<string, T>;
  /** The fleet view now, taken once for the round. */
  nodes: readonly FleetNode[];
  /** Probation and back-pressure state. */
  room: RoomState;
  /** The time of the round, ms since epoch. */
  now: number;
  /** Deadline of a backup leased now, ms since epoch. */
  deadline: number;
  /** Progress of active jobs, by job id (a job without any counts from its lease). */
  progress: ReadonlyMap<string, JobProgress>;
  /** peerId → its last progress on any job, ms since epoch. */
  nodeProgress: ReadonlyMap<string, number>;
}

/** Active jobs as the hedger sees them: a job that has a backup, or is one, is `hedged`. Pure. */
export function watchedJobs(
  jobs: readonly Lease[],
  progress: ReadonlyMap<string, JobProgress>,
  nodeProgress: ReadonlyMap<string, number>,
): WatchedJob[] {
  const paired = new Set(jobs.flatMap((j) => (j.backupOf ? [j.jobId, j.backupOf] : [])));
  return jobs.map((j) => ({
    jobId: j.jobId,
    peerId: j.peerId,
    model: j.model,
    lastProgressAt: progress.get(j.jobId)?.at ?? j.leasedAt,
    beatAt: progress.get(j.jobId)?.beatAt,
    nodeProgressAt: nodeProgress.get(j.peerId) ?? 0,
    hedged: paired.has(j.jobId),
  }));
}

/**
 * The node a backup of `job` goes to: the placer's choice without the job's own node and the nodes
 * that refused its work, or the next in rendezvous order with room; null when none has room.
 */
function backupTarget<T extends PlacementRequest['task']>(
  input: HedgeTickInput<T>,
  job: Lease,
  task: T,
): string | null {
  const { book, nodes, now } = input;
  const exclude = [job.peerId, ...book.refusedBy(job.taskId, job.model)];
  const ctx = roomContext(nodes, book, input.room, now);
  const p = input.placer.place({ task, model: job.model, exclude }, nodes, now, ctx.outstanding);
  const target = p.ok ? withRoom(p, ctx) : null;
  return !target || exclude.includes(target) ? null : target;
}

/**
 * One hedge round: backs up the jobs silent for much longer than their model's usual progress gap
 * (the hedger decides, the longest silent first), each on a node with room. Leases the backups in the
 * book and returns them in order: the runner starts them.
 */
export function hedgeTick<T extends PlacementRequest['task']>(input: HedgeTickInput<T>): HedgeDecision<T>[] {
  const { book, now } = input;
  const out: HedgeDecision<T>[] = [];
  const watched = watchedJobs(book.jobs(), input.progress, input.nodeProgress);
  for (const stalled of input.hedger.stalled(watched, now)) {
    const job = book.job(stalled.jobId);
    const task = job && input.tasks.get(job.taskId);
    if (!job || !task) continue;
    const target = backupTarget(input, job, task);
    if (!target) continue;
    const backup = book.hedge(job.jobId, target, now, input.deadline);
    if (!backup) continue;
    out.push({ backup, of: job, task, silentMs: now - stalled.lastProgressAt });
  }
  return out;
}
