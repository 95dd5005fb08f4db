import {
  type JobRequest,
  type SampleGenerated,
  sampleId,
  sampleSeed,
  type Usage,
} from '../../protocol/job.ts';
import { contentHash, type SampleBody } from '../../protocol/sample.ts';
import type { ScoreResult } from '../../sandbox/scorer.ts';
import type { GenerateRequest, Sample, SampleUsage } from '../models/adapter.ts';
import { jobError } from './job-error.ts';

/**
 * A job's samples from request to SampleBody (pure: no I/O): what the model servers are asked, the
 * `generated` progress message, and the body the worker logs once a sample is scored.
 */

/** The model-server request for the samples `todo` of `job` (outcome i is sample todo[i]). */
export function generateRequest(
  job: JobRequest,
  todo: readonly number[],
  signal: AbortSignal,
): GenerateRequest {
  return {
    model: job.model,
    messages: job.task.messages,
    k: todo.length,
    seeds: todo.map((i) => sampleSeed(job.sampling.seedBase, i)),
    sampling: {
      temperature: job.sampling.temperature,
      topP: job.sampling.topP,
      maxTokens: job.sampling.maxTokens,
    },
    promptFingerprint: job.task.promptFingerprint,
    signal,
  };
}

/** Token counts as the wire and the sample log carry them. */
export function usageOf(usage: SampleUsage): Usage {
  return { prompt: usage.promptTokens, completion: usage.completionTokens, cached: usage.cachedTokens };
}

/** The `generated` message of sample `index` (generated, its scoring about to start). */
export function generatedMessage(jobId: string, index: number, sample: Sample): SampleGenerated {
  return {
    type: 'generated',
    jobId,
    index,
    usage: usageOf(sample.usage),
    warm: sample.warm.warm === 'warm',
    latencyMs: sample.latencyMs,
    tokensPerSecond: sample.tokensPerSecond,
  };
}

/** What is scored: the answer's one code block, else its raw text. */
export function candidateOf(sample: Sample): string {
  return sample.extract.ok ? sample.extract.code : sample.text;
}

/**
 * Why an answer scores 0 whatever its tests would say (no sandbox run is spent on it): cut at max
 * tokens, or without exactly one code block. Null when it is scored in the sandbox.
 */
export function unscorableReason(sample: Sample): string | null {
  if (sample.truncated) return 'truncated: the generation stopped at max tokens (finish_reason length)';
  if (!sample.extract.ok)
    return `answer-format: ${sample.extract.flag} (${sample.extract.blocks} code blocks)`;
  return null;
}

/** The score of an unscorable answer (`reason`, from unscorableReason): 0, under the task's fingerprint. */
export function unscorableScore(reason: string, evalFingerprint: string): SampleBody['score'] {
  return { reward: 0, passed: 0, failed: 0, reasons: [reason], evalFingerprint, diagnostics: '' };
}

/**
 * The score of a sandbox run, bounded as the log keeps it. An infrastructure failure (the scorer
 * already tried again) is never stored as a 0: it throws a `sandbox-error`, the job fails and the
 * submitter places the unfinished samples again.
 */
export function sandboxScore(r: ScoreResult): SampleBody['score'] {
  if (r.status === 'error' || r.reward === null)
    throw jobError('sandbox-error', `scoring failed for infrastructure reasons: ${r.error}`);
  return {
    reward: r.reward,
    passed: r.passed,
    failed: r.failed,
    reasons: r.reasons.slice(0, 32).map((x) => x.slice(0, 200)),
    evalFingerprint: r.fingerprint,
    diagnostics: r.diagnostics.slice(0, 64 * 1024),
  };
}

/** How sample `index` of `job` was generated, as its SampleBody records it. */
function generationOf(job: JobRequest, index: number, sample: Sample): SampleBody['generation'] {
  return {
    sampling: job.sampling,
    seed: sampleSeed(job.sampling.seedBase, index),
    finishReason: sample.finishReason,
    truncated: sample.truncated,
    usage: usageOf(sample.usage),
    warm: sample.warm.warm === 'warm',
    latencyMs: sample.latencyMs,
    tokensPerSecond: sample.tokensPerSecond,
  };
}

/** The SampleBody of sample `index` of `job`, generated as `sample` and scored `score`, stamped now. */
export function sampleBody(
  job: JobRequest,
  index: number,
  sample: Sample,
  score: SampleBody['score'],
): SampleBody {
  const candidate = candidateOf(sample);
  return {
    v: 1,
    sampleId: sampleId(job.task.id, job.model, index, sampleSeed(job.sampling.seedBase, index)),
    taskId: job.task.id,
    split: job.task.split,
    promptFingerprint: job.task.promptFingerprint,
    model: job.model,
    index,
    candidate,
    contentHash: contentHash(candidate),
    generation: generationOf(job, index, sample),
    score,
    jobId: job.jobId,
    scoredAt: Date.now(),
  };
}
