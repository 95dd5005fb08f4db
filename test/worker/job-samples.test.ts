import { describe, expect, it } from 'vitest';
import type { Sample } from '../../node/models/adapter.ts';
import {
  generatedMessage,
  sampleBody,
  sandboxScore,
  unscorableReason,
  unscorableScore,
} from '../../node/worker/job-samples.ts';
import { extractCodeBlock } from '../../protocol/extract.ts';
import { SampleGenerated, SampleResult, sampleId, sampleSeed } from '../../protocol/job.ts';
import { contentHash, SampleBody, sampleResultOf } from '../../protocol/sample.ts';
import type { ScoreResult } from '../../sandbox/scorer.ts';
import { scoreResult } from '../helpers/fake-worker.ts';
import { EVAL_FP, jobRequest, sampleTask } from '../helpers/samples.ts';

// From the adapter's sample to the body the worker logs and the result it reports: pure steps, so
// every field is checked here against the schemas the wire and the log parse with.
const job = jobRequest(sampleTask('t1'), '12D3KooWsubmitter', [0, 1, 2], 3);
const CODE = 'export const add = (a: number, b: number) => a + b;';

function sample(overrides: Partial<Sample> = {}): Sample {
  const text = overrides.text ?? `Here:\n\`\`\`ts\n${CODE}\n\`\`\`\n`;
  return {
    index: 1,
    seed: sampleSeed(job.sampling.seedBase, 1),
    choice: 0,
    model: job.model,
    server: 'http://127.0.0.1:8080',
    text,
    extract: extractCodeBlock(text),
    finishReason: 'stop',
    truncated: false,
    usage: { promptTokens: 1200, completionTokens: 40, cachedTokens: 1184 },
    warm: { warm: 'warm', source: 'cached_tokens' },
    latencyMs: 800,
    ttftMs: null,
    tokensPerSecond: 50,
    attempts: 1,
    ...overrides,
  };
}

/** A sandbox run of the sample: every one of its 4 tests passed, type-checked. */
function scored(overrides: Partial<ScoreResult> = {}): ScoreResult {
  return scoreResult(job.task.id, { passed: 4, typecheck: 'passed', ...overrides });
}

describe('a job sample from the adapter to the log and the wire', () => {
  it('the body of a scored sample parses, names its sample, and hashes the extracted code', () => {
    const body = SampleBody.parse(sampleBody(job, 1, sample(), sandboxScore(scored())));
    expect(body.sampleId).toBe(sampleId(job.task.id, job.model, 1, sampleSeed(job.sampling.seedBase, 1)));
    // The code block alone (its closing line ends it), not the prose around it.
    expect(body.candidate).toBe(`${CODE}\n`);
    expect(body.contentHash).toBe(contentHash(`${CODE}\n`));
    expect(body.generation.usage).toEqual({ prompt: 1200, completion: 40, cached: 1184 });
    expect(body.generation.warm).toBe(true);
    expect(body).toMatchObject({ taskId: job.task.id, split: job.task.split, jobId: job.jobId, index: 1 });
    // What the worker reports of it is a projection that the submitter's schema accepts.
    expect(SampleResult.parse(sampleResultOf(body, job.jobId, 7))).toMatchObject({
      index: 1,
      seq: 7,
      reward: 1,
    });
  });

  it('an answer without exactly one code block is kept as its raw text, with its flag as the reason', () => {
    const text = 'no code here';
    const s = sample({ text, extract: extractCodeBlock(text) });
    const reason = unscorableReason(s);
    expect(reason).toMatch(/^answer-format: /);
    const body = SampleBody.parse(sampleBody(job, 1, s, unscorableScore(reason!, EVAL_FP)));
    expect(body.candidate).toBe(text);
    expect(body.score).toEqual({
      reward: 0,
      passed: 0,
      failed: 0,
      reasons: [reason],
      evalFingerprint: EVAL_FP,
      diagnostics: '',
    });
  });

  it('a truncated answer is unscorable whatever its code blocks, and says so first', () => {
    expect(unscorableReason(sample({ truncated: true, finishReason: 'length' }))).toMatch(/^truncated: /);
    expect(unscorableReason(sample({ truncated: true, text: 'x', extract: extractCodeBlock('x') }))).toMatch(
      /^truncated: /,
    );
    expect(unscorableReason(sample())).toBeNull();
  });

  it.each([
    ['status error', { status: 'error' as const, error: 'box setup failed', reward: null }],
    ['a null reward', { reward: null }],
  ])('an infrastructure failure (%s) is never a score: it throws a sandbox-error', (_what, overrides) => {
    expect(() => sandboxScore(scored(overrides))).toThrow(
      expect.objectContaining({ reason: 'sandbox-error', message: expect.stringMatching(/infrastructure/) }),
    );
  });

  it('a score is bounded as the log keeps it: 32 reasons of 200 characters, 64 KiB of diagnostics', () => {
    const score = sandboxScore(
      scored({
        reward: 0.5,
        reasons: Array.from({ length: 40 }, (_, i) => `${i}`.repeat(300)),
        diagnostics: 'd'.repeat(100_000),
      }),
    );
    expect(score.reasons).toHaveLength(32);
    expect(score.reasons.every((r) => r.length === 200)).toBe(true);
    expect(score.diagnostics).toHaveLength(64 * 1024);
    SampleBody.parse(sampleBody(job, 0, sample({ index: 0 }), score));
  });

  it('the generated message parses and carries the usage in the wire names', () => {
    const m = SampleGenerated.parse(
      generatedMessage(job.jobId, 2, sample({ warm: { warm: 'cold', source: 'cached_tokens' } })),
    );
    expect(m).toMatchObject({ index: 2, warm: false, usage: { prompt: 1200, completion: 40, cached: 1184 } });
  });
});
