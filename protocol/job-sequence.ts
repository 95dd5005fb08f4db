import {
  type JobEnd,
  type JobRefused,
  type JobRequest,
  type SampleGenerated,
  type SampleResult,
  type SampleScoring,
  sampleId,
  sampleSeed,
  type WorkerMessage,
} from './job.ts';

/** A worker broke the job protocol (out of order, a sample it was not asked for, a forged id). */
export class JobProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JobProtocolError';
  }
}

/** What one worker message means, once checked against the job. */
export type JobStep =
  | { type: 'accepted' }
  | { type: 'refused'; refusal: JobRefused }
  | { type: 'generated'; progress: SampleGenerated }
  | { type: 'scoring'; beat: SampleScoring }
  | { type: 'sample'; result: SampleResult }
  | { type: 'end'; end: JobEnd; missing: number[] };

/**
 * Checks the worker's side of one job, message by message (pure): first `accepted` or `refused`,
 * then `generated`/`sample` only for requested indices, each sample once, `scoring` heartbeats (only
 * when the request said `beats`) only for requested samples not reported yet, with the seed and sample id
 * the request implies, then `end` (`done` only when every sample was reported), then nothing.
 */
export interface JobSequence {
  /** Checks the next message; throws a JobProtocolError on a violation. */
  next(message: WorkerMessage): JobStep;
  /** Requested samples not reported yet, ascending. */
  missing(): number[];
  /** True once `accepted` was seen. */
  readonly accepted: boolean;
  /** True after `refused` or `end`. */
  readonly finished: boolean;
}

export function createJobSequence(request: JobRequest): JobSequence {
  const requested = new Set(request.samples);
  const reported = new Set<number>();
  let state: 'reply' | 'running' | 'finished' = 'reply';
  let accepted = false;
  const missing = () => request.samples.filter((i) => !reported.has(i));

  // A violation leaves the state as it was: the reader gives up the job, a writer may still end it properly.
  const fail = (message: string): never => {
    throw new JobProtocolError(`job ${request.jobId}: ${message}`);
  };
  const checkJob = (jobId: string, type: string) => {
    if (jobId !== request.jobId) fail(`${type} names job ${JSON.stringify(jobId)}`);
  };
  const checkIndex = (index: number, type: string) => {
    if (!requested.has(index)) fail(`${type} for sample ${index}, which the job did not ask for`);
    if (reported.has(index)) fail(`${type} for sample ${index}, which was already reported`);
  };

  return {
    next(message) {
      if (state === 'finished') return fail(`${message.type} after the job ended`);
      if (state === 'reply') {
        if (message.type === 'accepted') {
          checkJob(message.jobId, 'accepted');
          state = 'running';
          accepted = true;
          return { type: 'accepted' };
        }
        if (message.type === 'refused') {
          if (message.jobId !== '') checkJob(message.jobId, 'refused');
          state = 'finished';
          return { type: 'refused', refusal: message };
        }
        return fail(`${message.type} before the job was accepted`);
      }
      switch (message.type) {
        case 'accepted':
        case 'refused':
          return fail(`${message.type} after the job was accepted`);
        case 'generated':
          checkJob(message.jobId, 'generated');
          checkIndex(message.index, 'generated');
          return { type: 'generated', progress: message };
        case 'scoring':
          checkJob(message.jobId, 'scoring');
          if (!request.beats) fail('scoring heartbeat, which the job did not ask for');
          for (const index of message.samples) checkIndex(index, 'scoring');
          return { type: 'scoring', beat: message };
        case 'sample': {
          checkJob(message.jobId, 'sample');
          checkIndex(message.index, 'sample');
          const seed = sampleSeed(request.sampling.seedBase, message.index);
          if (message.seed !== seed)
            fail(`sample ${message.index} has seed ${message.seed}, expected ${seed}`);
          const id = sampleId(request.task.id, request.model, message.index, seed);
          if (message.sampleId !== id)
            fail(`sample ${message.index} has sample id ${message.sampleId}, expected ${id}`);
          reported.add(message.index);
          return { type: 'sample', result: message };
        }
        case 'end': {
          checkJob(message.jobId, 'end');
          const left = missing();
          if (message.status === 'done' && left.length > 0)
            fail(`end "done" with samples ${left.join(', ')} not reported`);
          state = 'finished';
          return { type: 'end', end: message, missing: left };
        }
      }
    },
    missing,
    get accepted() {
      return accepted;
    },
    get finished() {
      return state === 'finished';
    },
  };
}
