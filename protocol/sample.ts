import { z } from 'zod';
import { sha256Hex } from './canonical.ts';
import { type SampleResult, Sampling, Usage } from './job.ts';
import { Sha256Id } from './task.ts';

/** Largest candidate text a worker keeps, bytes of UTF-8 (longer output is truncated by max tokens first). */
export const MAX_CANDIDATE_BYTES = 2 * 1024 * 1024;
/** Largest frame on /vtnode/sample/2, bytes (one body with its metadata). */
export const MAX_SAMPLE_FRAME_BYTES = MAX_CANDIDATE_BYTES + 64 * 1024;

/** The score of one candidate, as the worker's sandbox judged it. */
export const SampleScore = z.object({
  /** Reward in [0, 1]. */
  reward: z.number().min(0).max(1),
  /** Tests that passed. */
  passed: z.number().int().min(0),
  /** Tests that failed. */
  failed: z.number().int().min(0),
  /** Why the reward is below the pass rate or zero (judge's reason codes). */
  reasons: z.array(z.string().min(1).max(200)).max(32),
  /** Evaluation fingerprint of the score. */
  evalFingerprint: Sha256Id,
  /** Judge diagnostics (failing test names, type errors), capped; feeds repair exports. */
  diagnostics: z.string().max(64 * 1024),
});
export type SampleScore = z.infer<typeof SampleScore>;

/** How the candidate was generated. */
export const Generation = z.object({
  /** Sampling parameters of the job. */
  sampling: Sampling,
  /** Seed of this sample. */
  seed: z.number().int().min(0),
  /** finish_reason of the response (`stop`, `length`, ...). */
  finishReason: z.string().min(1).max(64),
  /** True when finish_reason was `length`. */
  truncated: z.boolean(),
  /** Token counts. */
  usage: Usage,
  /** True when the prompt was observed cached. */
  warm: z.boolean(),
  /** Wall time of the request, ms. */
  latencyMs: z.number().min(0),
  /** Completion tokens per second. */
  tokensPerSecond: z.number().min(0),
});
export type Generation = z.infer<typeof Generation>;

/** A sample body: what the worker's log keeps and /vtnode/sample/2 serves. */
export const SampleBody = z.object({
  /** Schema version of the body. */
  v: z.literal(1),
  /** sampleId(task id, model, index, seed). */
  sampleId: Sha256Id,
  /** Task answered. */
  taskId: z.string().min(1).max(200),
  /** The task's split. */
  split: z.enum(['train', 'eval']),
  /** The task's prompt fingerprint. */
  promptFingerprint: Sha256Id,
  /** Model that generated it. */
  model: z.string().min(1).max(256),
  /** Sample index within the task's k. */
  index: z.number().int().min(0),
  /** The candidate text (the model's answer, as written over the target). */
  candidate: z.string().refine((s) => Buffer.byteLength(s) <= MAX_CANDIDATE_BYTES, {
    message: `candidate is larger than ${MAX_CANDIDATE_BYTES} bytes`,
  }),
  /** sha256 of the candidate text. */
  contentHash: Sha256Id,
  /** Generation metadata. */
  generation: Generation,
  /** The sandbox's score. */
  score: SampleScore,
  /** Job that produced it. */
  jobId: z.string().min(1).max(512),
  /** When it was scored, ms since epoch (origin's clock). */
  scoredAt: z.number().int().min(0),
});
export type SampleBody = z.infer<typeof SampleBody>;

/**
 * What a worker reports for a sample its log holds under `seq` (/vtnode/job/1 `sample`): the body's
 * fields the submitter counts, without the candidate. `jobId` is the job reporting it, which is not
 * the body's own when the log already held the sample from an earlier placement.
 */
export function sampleResultOf(body: SampleBody, jobId: string, seq: number): SampleResult {
  const { generation: g, score: s } = body;
  return {
    type: 'sample',
    jobId,
    sampleId: body.sampleId,
    index: body.index,
    seed: g.seed,
    reward: s.reward,
    passed: s.passed,
    failed: s.failed,
    reasons: s.reasons,
    truncated: g.truncated,
    usage: g.usage,
    warm: g.warm,
    latencyMs: g.latencyMs,
    tokensPerSecond: g.tokensPerSecond,
    contentHash: body.contentHash,
    evalFingerprint: s.evalFingerprint,
    seq,
    scoredAt: body.scoredAt,
  };
}

/** Content hash of a candidate: `sha256:` + hex sha256 of its UTF-8 text. */
export function contentHash(candidate: string): string {
  return `sha256:${sha256Hex(candidate)}`;
}
