import { describe, expect, it } from 'vitest';
import { claimFor, Digest } from '../../protocol/digest.ts';
import { SampleResult } from '../../protocol/job.ts';
import { SampleBody, sampleResultOf } from '../../protocol/sample.ts';
import { sampleBody } from '../helpers/samples.ts';

// One sample shape: the body a worker logs. The job result and the digest are projections of it,
// each written once (sampleResultOf, claimFor); these tests pin every projected field to its source.
describe('projections of a sample body', () => {
  const bodies = [
    sampleBody('t1', 'qwen', 0),
    sampleBody('t2', 'llama', 3, { reward: 0.5, split: 'eval', seedBase: 7 }),
  ];

  it.each(bodies)('the job result of $sampleId parses and carries the body field by field', (body) => {
    SampleBody.parse(body);
    const r = SampleResult.parse(sampleResultOf(body, 'job-9', 42));
    expect(r).toEqual({
      type: 'sample',
      jobId: 'job-9',
      sampleId: body.sampleId,
      index: body.index,
      seed: body.generation.seed,
      reward: body.score.reward,
      passed: body.score.passed,
      failed: body.score.failed,
      reasons: body.score.reasons,
      truncated: body.generation.truncated,
      usage: body.generation.usage,
      warm: body.generation.warm,
      latencyMs: body.generation.latencyMs,
      tokensPerSecond: body.generation.tokensPerSecond,
      contentHash: body.contentHash,
      evalFingerprint: body.score.evalFingerprint,
      seq: 42,
      scoredAt: body.scoredAt,
    });
  });

  it('the job result reports the job asking, not the job that first logged the sample', () => {
    const body = sampleBody('t1', 'qwen', 1);
    expect(sampleResultOf(body, 'later-job', 1).jobId).toBe('later-job');
    expect(body.jobId).not.toBe('later-job');
  });

  it('the job result never carries the candidate or the diagnostics', () => {
    const body = { ...sampleBody('t1', 'qwen', 1), candidate: 'SECRET' };
    body.score = { ...body.score, diagnostics: 'DIAG' };
    const text = JSON.stringify(sampleResultOf(body, 'j', 1));
    expect(text).not.toContain('SECRET');
    expect(text).not.toContain('DIAG');
  });

  it.each(bodies)('the digest of $sampleId parses, v2 with a task hash and v1 without', (body) => {
    const hash = `sha256:${'ab'.repeat(32)}`;
    const v2 = Digest.parse(claimFor(body, 'origin-a', 5, hash));
    expect(v2).toEqual({
      v: 2,
      sampleId: body.sampleId,
      taskId: body.taskId,
      model: body.model,
      split: body.split,
      reward: body.score.reward,
      contentHash: body.contentHash,
      evalFingerprint: body.score.evalFingerprint,
      origin: 'origin-a',
      seq: 5,
      taskHash: hash,
    });
    const v1 = Digest.parse(claimFor(body, 'origin-a', 5));
    expect(v1.v).toBe(1);
    expect('taskHash' in v1).toBe(false);
  });
});
