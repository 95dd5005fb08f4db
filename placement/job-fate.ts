/**
 * What the submitter does when a job's stream ends: the worker refused it, ended it failed, or the
 * stream broke without the worker's `end`. Each verdict says how the lease-book lease ends (the
 * release cause), whether the node is blamed (a reputation failure), and for a broken stream whether
 * the lease is held while the submitter re-attaches (the worker goes on with the job). Pure: the
 * runner (node/submitter/runner.ts) executes these verdicts.
 */
import type { ReleaseCause } from './lease-book.ts';

/** First pause before re-attaching to a job whose stream broke, ms; it doubles up to REATTACH_MAX_MS. */
export const REATTACH_MIN_MS = 500;
/** Longest pause between two attempts to re-attach to a job, ms. */
export const REATTACH_MAX_MS = 5000;

/** How a job's lease ends. */
export interface ReleaseVerdict {
  /** The lease book's release cause. */
  release: ReleaseCause;
  /** True when the node is blamed for it (a reputation failure: it cools down). */
  blame: boolean;
  /** True for back-pressure: the node is full (another submitter filled it) and gets no job until it backs off. */
  full: boolean;
}

/**
 * A worker refused a job: `full` is back-pressure (released as busy, not counted against the
 * attempts, no blame: it is tried again after its next advert); any other reason is the node's failure. Pure.
 */
export function refusalVerdict(reason: string): ReleaseVerdict {
  if (reason === 'full') return { release: 'busy', blame: false, full: true };
  return { release: 'refused', blame: true, full: false };
}

/** A worker ended a job failed: its samples are re-placed, and its node is blamed unless the job was cancelled. Pure. */
export function failedJobVerdict(reason: string): ReleaseVerdict {
  const cancelled = reason === 'cancelled';
  return { release: cancelled ? 'cancelled' : 'failed', blame: !cancelled, full: false };
}

/** What the submitter knows of a job whose stream ended without the worker's `end`. */
export interface LostStream {
  /** Why the stream ended (node/submitter/job-client.ts LostCause). */
  cause: string;
  /** True when the submitter itself aborted the stream (cancel, deadline, done elsewhere). */
  aborted: boolean;
  /** True when the worker accepted the job on one of its streams (it may go on with it). */
  accepted: boolean;
  /** True when the job runs on the submitter's own node (its executor went with the stream). */
  self: boolean;
}

/**
 * What a lost stream means: `cancelled` releases the job as cancelled (no blame); `lost` releases
 * it and blames the node (a protocol violation, a worker that never took the job, or the submitter's
 * own executor); `detached` holds the lease and re-attaches (the worker took the job and goes on with
 * it), after checking the worker is not plainly gone when nothing listens at its addresses (`checkGone`).
 */
export type LostVerdict =
  | { kind: 'cancelled' }
  | { kind: 'lost'; release: ReleaseCause }
  | { kind: 'detached'; checkGone: boolean };

/** The verdict on a job stream that ended without the worker's `end`. Pure. */
export function lostVerdict(lost: LostStream): LostVerdict {
  if (lost.cause === 'cancelled' || lost.aborted) return { kind: 'cancelled' };
  if (lost.cause === 'violation' || !lost.accepted || lost.self)
    return { kind: 'lost', release: lost.cause === 'violation' ? 'failed' : 'disconnected' };
  return { kind: 'detached', checkGone: lost.cause === 'no-listener' };
}

/** The deadline of a job whose stream just broke: held `leaseMs` from `now`, never past its own deadline. Pure. */
export function detachedDeadline(deadline: number, now: number, leaseMs: number): number {
  return Math.min(deadline, now + leaseMs);
}

/** The pause before the next attempt to re-attach, after waiting `pause`: doubled, at most REATTACH_MAX_MS. Pure. */
export function nextReattachPause(pause: number): number {
  return Math.min(pause * 2, REATTACH_MAX_MS);
}

/**
 * True when job `jobId`, finished by the results of job `by`, sat on its work: `by` is its backup
 * (`backupOf` is the job `by` backs up) and `jobId` sent no scored sample. Its node is then blamed. Pure.
 */
export function satOnJob(jobId: string, backupOf: string | undefined, scored: number): boolean {
  return backupOf === jobId && scored === 0;
}
