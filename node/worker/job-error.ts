import type { JobFailure } from '../../protocol/job.ts';

/**
 * Why a job ends early, as the executor's steps throw it: `reason` is the `end`'s reason when the step
 * knows it (a model, sandbox or storage failure); without one it follows from why the job was aborted.
 */
export type JobError = Error & { reason?: JobFailure };

/** An error that ends a job with `reason`. */
export function jobError(reason: JobFailure, message: string): JobError {
  return Object.assign(new Error(message), { reason });
}

/** The `end` reason of a job that failed with `err`: its own reason, else the one its abort gives. */
export function failureReason(err: JobError, abortCause: string | undefined, stopped: boolean): JobFailure {
  return err.reason ?? abortReason(abortCause, stopped);
}

/**
 * The `end` reason of an aborted job from the cause its abort gave (`abortCause`, the abort reason's
 * message): deadline, cancelled or abandoned; else `shutdown` when the node is stopping, else `internal`.
 */
function abortReason(abortCause: string | undefined, stopped: boolean): JobFailure {
  if (abortCause === 'deadline') return 'deadline';
  if (abortCause === 'cancelled' || abortCause === 'abandoned') return 'cancelled';
  return stopped ? 'shutdown' : 'internal';
}
