import { jobBounds } from '../../placement/room.ts';
import { canonicalJson } from '../../protocol/canonical.ts';
import type { JobRequest, RefusalReason } from '../../protocol/job.ts';
import type { JobExecutorOptions } from './executor.ts';

/**
 * Whether the worker takes a job (pure: decisions only): a new job is accepted or refused; a job
 * naming a running one re-attaches to it; a job placing again the work of one running without a
 * stream adopts it.
 */

/** What admission needs to know of a running job. */
export interface AdmittedJob {
  /** The job as first requested. */
  job: JobRequest;
  /** Peer id of the submitter it belongs to. */
  submitter: string;
  /** Its run: whether a stream is attached now. */
  run: { readonly attached: boolean };
}

/** The node as a new job finds it. */
export interface AdmissionState {
  /** The executor is stopping. */
  stopped: boolean;
  /** Jobs admitted and not over: waiting for a job slot, generating, or past it and scoring. */
  running: number;
  /** Of those, jobs generating (each holds a job slot). */
  generating: number;
  /** Of those, jobs waiting for a job slot. */
  waiting: number;
}

/** What of the executor's options admission reads. */
export type AdmissionOptions = Pick<
  JobExecutorOptions,
  'storage' | 'paused' | 'scorer' | 'workspaces' | 'fetching' | 'models' | 'maxJobs'
>;

/** Why a job that came from `remotePeer` is not that peer's, or null when it is. */
function submitterMismatch(job: JobRequest, remotePeer: string): string | null {
  if (job.submitter === remotePeer) return null;
  return `the job names submitter ${job.submitter} but came from ${remotePeer}`;
}

/** Why a new job is refused (reason and message), or null when the node takes it. */
export function refusal(
  job: JobRequest,
  remotePeer: string,
  options: AdmissionOptions,
  state: AdmissionState,
): [RefusalReason, string] | null {
  const mismatch = submitterMismatch(job, remotePeer);
  if (mismatch) return ['bad-request', mismatch];
  if (state.stopped) return ['full', 'the node is shutting down'];
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
  return fullness(state, options.maxJobs);
}

/**
 * Why the node is full, or null: its `maxJobs` slots are generation slots, so a job whose samples are
 * all generated (only scoring left) frees its slot for the next, and up to `maxJobs` such jobs are
 * kept besides; one more job may wait for a slot (placement/room.ts `jobBounds`, which the submitter
 * applies too).
 */
export function fullness(state: AdmissionState, maxJobs: number): [RefusalReason, string] | null {
  const bounds = jobBounds(maxJobs, true);
  if (state.generating + state.waiting >= bounds.generation)
    return [
      'full',
      `${state.generating} of ${maxJobs} job slots busy, ${state.waiting} job(s) waiting for one`,
    ];
  if (state.running >= bounds.total) {
    const tail = state.running - state.generating - state.waiting;
    return ['full', `${state.running} jobs admitted (${tail} finishing their scoring)`];
  }
  return null;
}

/** Why a `job` naming the running job `entry` cannot re-attach to it, or null. */
export function reattachRefusal(entry: AdmittedJob, job: JobRequest, remotePeer: string): string | null {
  const mismatch = submitterMismatch(job, remotePeer);
  if (mismatch) return mismatch;
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
export function adoptable<T extends AdmittedJob>(
  running: Iterable<T>,
  job: JobRequest,
  remotePeer: string,
): T | null {
  for (const entry of running) {
    if (entry.submitter !== remotePeer || entry.run.attached) continue;
    if (entry.job.task.id !== job.task.id || entry.job.model !== job.model) continue;
    if (canonicalJson(entry.job.sampling) !== canonicalJson(job.sampling)) continue;
    if (job.samples.every((i) => entry.job.samples.includes(i))) return entry;
  }
  return null;
}
