import { z } from 'zod';
import { fingerprint } from './canonical.ts';
import { Sha256Id, Task } from './task.ts';

/**
 * Messages of `/vtnode/job/1`: the submitter sends one `job` (and may later send `cancel`); the
 * worker answers `accepted` or `refused` first, then one `sample` per scored sample as soon as it is
 * scored (optionally preceded by a `generated` for it), then one `end`. Every frame is one length-prefixed JSON message (node/wire/framed.ts).
 *
 * A job outlives its stream: when the stream breaks (a connection lost, a stalled node), the worker
 * keeps running the job for `leaseMs`, and a new stream whose `job` names the same job id (from the
 * same submitter, for the same task and model, a subset of its samples) re-attaches to it: `accepted`,
 * then the requested samples already scored, then the rest as they are scored, then `end`.
 */

/** Largest frame on /vtnode/job/1, bytes (a job carries its task, whose prompt may hold whole files). */
export const MAX_JOB_FRAME_BYTES = 4 * 1024 * 1024;
/** Most samples one job may ask for. */
export const MAX_JOB_SAMPLES = 256;
/** How long a worker keeps a job whose stream broke when the request does not say, ms. */
export const DEFAULT_JOB_LEASE_MS = 60_000;
/** Largest seed base: seeds stay 32-bit signed integers (what llama-server, vLLM and Ollama accept). */
export const MAX_SEED = 2 ** 31 - 1;

const count = z.number().int().min(0);
const PeerIdText = z.string().min(1).max(128);
const ModelId = z.string().min(1).max(256);

/** Sampling parameters of every sample of a job. */
export const Sampling = z.object({
  /** Softmax temperature. */
  temperature: z.number().min(0).max(2),
  /** Nucleus sampling mass. */
  topP: z.number().gt(0).max(1),
  /** Most completion tokens per sample; a sample that hits it is truncated (reward 0). */
  maxTokens: z.number().int().min(1).max(1_000_000),
  /** Seed of sample index 0; sample i uses `sampleSeed(seedBase, i)`. */
  seedBase: z.number().int().min(0).max(MAX_SEED),
});
export type Sampling = z.infer<typeof Sampling>;

/** The seed of sample `index` of a job whose seed base is `seedBase` (wraps inside the 31-bit range). */
export function sampleSeed(seedBase: number, index: number): number {
  return (seedBase + index) % (MAX_SEED + 1);
}

/**
 * The default seed base of a campaign created as `name` at `createdAt` (ms): a fresh one per campaign,
 * so a second round over the same tasks and model gets new samples instead of the rows the workers
 * already logged (sample ids are a function of task, model, index and seed). A campaign stores the
 * seed base it ran with; `vtnode run --seed N` reproduces it exactly.
 */
export function campaignSeedBase(name: string, createdAt: number): number {
  const hex = fingerprint({ campaign: name, createdAt }).slice('sha256:'.length, 'sha256:'.length + 8);
  return Number.parseInt(hex, 16) % (MAX_SEED + 1);
}

/**
 * Deterministic sample id: the fingerprint of (task id, model, sample index, seed). The same sample
 * generated twice (a re-placed job, a restarted submitter) gets the same id, so a repeat is harmless.
 */
export function sampleId(taskId: string, model: string, index: number, seed: number): string {
  return fingerprint({ index, model, seed, taskId });
}

/** Submitter → worker: run these samples of a task with a model and stream back the results. */
export const JobRequest = z
  .object({
    type: z.literal('job'),
    /** Job id from the submitter's lease book (task, model, attempt). */
    jobId: z.string().min(1).max(512),
    /** Campaign the job belongs to, for the worker's logs. */
    campaign: z.string().min(1).max(128),
    /** The full task (prompt, workspace, judge). */
    task: Task,
    /** Model id as the worker's server lists it. */
    model: ModelId,
    /** Samples per task in the campaign: indices run from 0 to k−1. */
    k: z.number().int().min(1).max(MAX_JOB_SAMPLES),
    /** Sample indices to run, ascending, no repeats (a re-placed job runs only the unfinished ones). */
    samples: z.array(count).min(1).max(MAX_JOB_SAMPLES),
    /** Sampling parameters shared by the job's samples. */
    sampling: Sampling,
    /** Time the worker has to finish, ms from receipt (relative, so clocks need not agree). */
    deadlineMs: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 3_600_000),
    /** Peer id of the submitter (must equal the stream's remote peer). */
    submitter: PeerIdText,
    /** Time the worker keeps running the job after its stream breaks, waiting for a re-attach, ms (default 60 s). */
    leaseMs: z
      .number()
      .int()
      .min(1000)
      .max(24 * 3_600_000)
      .optional(),
    /**
     * The submitter understands `scoring` heartbeats: the worker sends them while samples of the job
     * wait for or run in its sandbox. Absent from submitters older than heartbeats (they get none).
     */
    beats: z.boolean().optional(),
  })
  .superRefine((job, ctx) => {
    for (let i = 0; i < job.samples.length; i++) {
      const s = job.samples[i]!;
      if (s >= job.k)
        ctx.addIssue({
          code: 'custom',
          path: ['samples', i],
          message: `index ${s} is not below k = ${job.k}`,
        });
      if (i > 0 && s <= job.samples[i - 1]!)
        ctx.addIssue({
          code: 'custom',
          path: ['samples', i],
          message: 'indices must be ascending without repeats',
        });
    }
  });
export type JobRequest = z.infer<typeof JobRequest>;

/** Submitter → worker: stop the job; the worker ends it with `end` (failed, cancelled). */
export const JobCancel = z.object({
  type: z.literal('cancel'),
  /** Job to stop. */
  jobId: z.string().min(1).max(512),
});
export type JobCancel = z.infer<typeof JobCancel>;

/** Everything a submitter sends on /vtnode/job/1. */
export const SubmitterMessage = z.discriminatedUnion('type', [JobRequest, JobCancel]);
export type SubmitterMessage = z.infer<typeof SubmitterMessage>;

/** Why a worker refuses a job. */
export const RefusalReason = z.enum([
  'full',
  'model-missing',
  'workspace-missing',
  'sandbox-unavailable',
  'bad-request',
]);
export type RefusalReason = z.infer<typeof RefusalReason>;

/** Worker → submitter, first reply: the job is taken. */
export const JobAccepted = z.object({
  type: z.literal('accepted'),
  /** The job taken. */
  jobId: z.string().min(1).max(512),
  /** Worker's peer id. */
  worker: PeerIdText,
});
export type JobAccepted = z.infer<typeof JobAccepted>;

/** Worker → submitter, first reply: the job is not taken; the stream closes after it. */
export const JobRefused = z.object({
  type: z.literal('refused'),
  /** The job refused (empty when the request could not be parsed far enough to know it). */
  jobId: z.string().max(512),
  /** Machine-readable cause. */
  reason: RefusalReason,
  /** Human-readable detail. */
  message: z.string().max(2000),
});
export type JobRefused = z.infer<typeof JobRefused>;

/** Token counts of one generation. */
export const Usage = z.object({
  /** Prompt tokens. */
  prompt: count,
  /** Completion tokens. */
  completion: count,
  /** Prompt tokens served from the server's cache, or null when the server does not say (Ollama). */
  cached: count.nullable(),
});
export type Usage = z.infer<typeof Usage>;

/** Worker → submitter: one sample, generated, scored and durable in the worker's sample log. */
export const SampleResult = z.object({
  type: z.literal('sample'),
  /** Job the sample belongs to. */
  jobId: z.string().min(1).max(512),
  /** sampleId(task id, model, index, seed). */
  sampleId: Sha256Id,
  /** Sample index within the task's k. */
  index: count,
  /** Seed the sample was generated with. */
  seed: z.number().int().min(0).max(MAX_SEED),
  /** Reward in [0, 1] from the worker's sandbox. */
  reward: z.number().min(0).max(1),
  /** Tests that passed. */
  passed: count,
  /** Tests that failed. */
  failed: count,
  /** Why the reward is below the pass rate or zero (judge's reason codes), empty when none. */
  reasons: z.array(z.string().min(1).max(200)).max(32),
  /** True when generation stopped at max tokens (finish_reason `length`): reward 0. */
  truncated: z.boolean(),
  /** Token counts. */
  usage: Usage,
  /** True when the prompt was observed cached (cached tokens, or prompt-eval timing where the server reports no count). */
  warm: z.boolean(),
  /** Wall time of the generation request, ms. */
  latencyMs: z.number().min(0),
  /** Completion tokens per second of the request. */
  tokensPerSecond: z.number().min(0),
  /** sha256 of the candidate text. */
  contentHash: Sha256Id,
  /** Evaluation fingerprint of the score (judge, workspace, scorer version). */
  evalFingerprint: Sha256Id,
  /** The worker's sample-log sequence number of this sample. */
  seq: z.number().int().min(1),
  /**
   * When the worker scored it, ms since epoch (its clock): earlier than the campaign when its log already
   * held the sample (same task, model, index and seed). Workers before 0.1 omit it.
   */
  scoredAt: z.number().int().min(0).optional(),
});
export type SampleResult = z.infer<typeof SampleResult>;

/**
 * The worker's job load as it sends a message (the advert's `load`, protocol/advert.ts), stamped
 * with its clock (`at`, ms since epoch, comparable with its adverts' `sentAt`): a submitter sees a
 * slot freed by its own job at once, not at the worker's next advert.
 */
export const WorkerLoad = z.object({
  /** Jobs with nothing in progress: waiting for a scoring slot, or for a job slot to generate. */
  queued: count,
  /** Jobs generating or scoring. */
  running: count,
  /** Of those, jobs generating: each holds a job slot. */
  generating: count,
  /** Of the queued jobs, those waiting for a job slot (absent from older nodes, which keep none). */
  waiting: count.optional(),
  /** Job slots offered (0 while the node takes no jobs). */
  capacity: count,
  /** When the worker took it, its clock, ms since epoch. */
  at: count,
});
export type WorkerLoad = z.infer<typeof WorkerLoad>;

/**
 * Worker → submitter, optional progress: a sample is generated and queued for scoring (its
 * `sample` result follows). Lets the submitter show generated vs scored and measure tokens/s early.
 */
export const SampleGenerated = z.object({
  type: z.literal('generated'),
  /** Job the sample belongs to. */
  jobId: z.string().min(1).max(512),
  /** Sample index within the task's k. */
  index: count,
  /** Token counts. */
  usage: Usage,
  /** True when the prompt was observed cached. */
  warm: z.boolean(),
  /** Wall time of the generation request, ms. */
  latencyMs: z.number().min(0),
  /** Completion tokens per second of the request. */
  tokensPerSecond: z.number().min(0),
  /** The worker's load once this sample was generated (its job may have freed its slot); older workers omit it. */
  load: WorkerLoad.optional(),
});
export type SampleGenerated = z.infer<typeof SampleGenerated>;

/** How often a worker sends `scoring` while samples of a job wait for or run in its sandbox, ms. */
export const SCORING_BEAT_MS = 10_000;

/**
 * Worker → submitter, a heartbeat (only to a submitter whose job said `beats`): these generated
 * samples are being scored, or wait for a sandbox slot. Sent every SCORING_BEAT_MS while any is, so
 * a worker that scores slowly (a cold type-check on a loaded machine) is not taken for a silent one
 * and its work is not done twice. A hung model server sends none: generation is not covered.
 */
export const SampleScoring = z.object({
  type: z.literal('scoring'),
  /** Job the samples belong to. */
  jobId: z.string().min(1).max(512),
  /** Indices of the samples being scored or waiting to be, ascending. */
  samples: z.array(count).min(1).max(MAX_JOB_SAMPLES),
});
export type SampleScoring = z.infer<typeof SampleScoring>;

/** Why a job ended without all its samples. */
export const JobFailure = z.enum([
  'model-error',
  'sandbox-error',
  'deadline',
  'cancelled',
  'shutdown',
  'internal',
]);
export type JobFailure = z.infer<typeof JobFailure>;

/** Worker → submitter, last message: the job is over. */
export const JobEnd = z.discriminatedUnion('status', [
  z.object({
    type: z.literal('end'),
    /** The job ended. */
    jobId: z.string().min(1).max(512),
    /** Every requested sample was reported. */
    status: z.literal('done'),
    /** The worker's load once the job was over; older workers omit it. */
    load: WorkerLoad.optional(),
  }),
  z.object({
    type: z.literal('end'),
    /** The job ended. */
    jobId: z.string().min(1).max(512),
    /** Some requested samples were not reported; the submitter re-places them. */
    status: z.literal('failed'),
    /** Machine-readable cause. */
    reason: JobFailure,
    /** Human-readable detail. */
    message: z.string().max(2000),
    /** The worker's load once the job was over; older workers omit it. */
    load: WorkerLoad.optional(),
  }),
]);
export type JobEnd = z.infer<typeof JobEnd>;

/** Everything a worker sends on /vtnode/job/1 (first `accepted` or `refused`, then `generated`/`scoring`/`sample`s, then `end`). */
export const WorkerMessage = z.discriminatedUnion('type', [
  JobAccepted,
  JobRefused,
  SampleGenerated,
  SampleScoring,
  SampleResult,
  JobEnd,
]);
export type WorkerMessage = z.infer<typeof WorkerMessage>;
