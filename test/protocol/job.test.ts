import { describe, expect, it } from 'vitest';
import { Digest } from '../../protocol/digest.ts';
import {
  campaignSeedBase,
  JobRequest,
  MAX_SEED,
  SampleResult,
  SubmitterMessage,
  sampleId,
  sampleSeed,
  WorkerMessage,
} from '../../protocol/job.ts';
import { ParseError, parseWith } from '../../protocol/parse.ts';
import { SampleBody } from '../../protocol/sample.ts';
import { EVAL_FP, sampleBody, sampleTask } from '../helpers/samples.ts';

const job = {
  type: 'job',
  jobId: 't1#qwen#1',
  campaign: 'c1',
  task: sampleTask('t1'),
  model: 'qwen',
  k: 8,
  samples: [0, 1, 5, 7],
  sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase: 42 },
  deadlineMs: 600_000,
  submitter: '12D3KooWsubmitter',
};

const fields = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ParseError);
    return (err as ParseError).issues.map((i) => i.path);
  }
  throw new Error('expected a ParseError');
};

describe('job protocol schemas', () => {
  it('accepts a job and a cancel as submitter messages', () => {
    expect(SubmitterMessage.parse(job)).toEqual(JobRequest.parse(job));
    expect(SubmitterMessage.parse({ type: 'cancel', jobId: 'x' })).toEqual({ type: 'cancel', jobId: 'x' });
  });

  it('rejects indices at or beyond k, unsorted or repeated indices, and bad sampling, naming each field', () => {
    const bad = { ...job, samples: [0, 3, 3, 9], sampling: { ...job.sampling, topP: 0 } };
    expect(fields(() => parseWith(SubmitterMessage, bad, 'job from peer'))).toEqual(
      expect.arrayContaining(['samples.2', 'samples.3', 'sampling.topP']),
    );
    expect(fields(() => parseWith(JobRequest, { ...job, samples: [] }, 'job'))).toEqual(['samples']);
    expect(
      fields(() => parseWith(JobRequest, { ...job, task: { ...job.task, promptFingerprint: 'x' } }, 'j')),
    ).toEqual(['task.promptFingerprint']);
  });

  it('parses every worker message and names a bad discriminator or field', () => {
    const body = sampleBody('t1', 'qwen', 3);
    const result = {
      type: 'sample',
      jobId: job.jobId,
      sampleId: body.sampleId,
      index: 3,
      seed: body.generation.seed,
      reward: 1,
      passed: 4,
      failed: 0,
      reasons: [],
      truncated: false,
      usage: { prompt: 1200, completion: 40, cached: null },
      warm: true,
      latencyMs: 800,
      tokensPerSecond: 50,
      contentHash: body.contentHash,
      evalFingerprint: EVAL_FP,
      seq: 17,
    };
    expect(SampleResult.parse(result)).toEqual(result);
    for (const m of [
      { type: 'accepted', jobId: 'j', worker: 'w' },
      { type: 'refused', jobId: '', reason: 'bad-request', message: 'samples.2: repeated' },
      result,
      { type: 'end', jobId: 'j', status: 'done' },
      { type: 'end', jobId: 'j', status: 'failed', reason: 'model-error', message: '500 from server' },
    ])
      expect(WorkerMessage.parse(m)).toEqual(m);
    expect(
      fields(() =>
        parseWith(WorkerMessage, { type: 'refused', jobId: 'j', reason: 'busy', message: '' }, 'w'),
      ),
    ).toEqual(['reason']);
    expect(fields(() => parseWith(WorkerMessage, { ...result, seq: 0, usage: { prompt: 1 } }, 'w'))).toEqual(
      expect.arrayContaining(['seq', 'usage.completion', 'usage.cached']),
    );
    expect(
      fields(() => parseWith(WorkerMessage, { type: 'end', jobId: 'j', status: 'failed' }, 'w')),
    ).toEqual(expect.arrayContaining(['reason', 'message']));
    expect(() => parseWith(WorkerMessage, { type: 'hello' }, 'w')).toThrow(/type: Invalid discriminator/);
  });

  it('carries the worker’s load on `generated` and `end` when it sends one, and names a bad field of it', () => {
    const load = { queued: 0, running: 1, generating: 0, capacity: 2, at: 1_796_000_000_000 };
    const generated = {
      type: 'generated',
      jobId: 'j',
      index: 2,
      usage: { prompt: 1200, completion: 40, cached: 1100 },
      warm: true,
      latencyMs: 800,
      tokensPerSecond: 50,
    };
    for (const m of [
      generated,
      { ...generated, load },
      { ...generated, load: { ...load, queued: 1, waiting: 1 } },
      { type: 'end', jobId: 'j', status: 'done', load },
      { type: 'end', jobId: 'j', status: 'failed', reason: 'cancelled', message: 'cancelled', load },
    ])
      expect(WorkerMessage.parse(m)).toEqual(m);
    const bad = { ...generated, load: { ...load, generating: -1, waiting: 0.5, at: 'now' } };
    expect(fields(() => parseWith(WorkerMessage, bad, 'w'))).toEqual(
      expect.arrayContaining(['load.generating', 'load.waiting', 'load.at']),
    );
    const noCapacity = { type: 'end', jobId: 'j', status: 'done', load: { ...load, capacity: undefined } };
    expect(fields(() => parseWith(WorkerMessage, noCapacity, 'w'))).toEqual(['load.capacity']);
  });

  it('derives deterministic sample ids and seeds', () => {
    expect(sampleId('t1', 'qwen', 0, 42)).toBe(sampleId('t1', 'qwen', 0, 42));
    const ids = new Set([
      sampleId('t1', 'qwen', 0, 42),
      sampleId('t1', 'qwen', 1, 42),
      sampleId('t1', 'qwen', 0, 43),
      sampleId('t2', 'qwen', 0, 42),
      sampleId('t1', 'llama', 0, 42),
    ]);
    expect(ids.size).toBe(5);
    expect(sampleSeed(42, 3)).toBe(45);
    expect(sampleSeed(MAX_SEED, 1)).toBe(0);
  });

  it('gives each campaign its own default seed base, the same for the same campaign record', () => {
    expect(campaignSeedBase('round-1', 1000)).toBe(campaignSeedBase('round-1', 1000));
    const seeds = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const seed = campaignSeedBase(`round-${i % 20}`, 1000 + Math.floor(i / 20));
      expect(Number.isInteger(seed) && seed >= 0 && seed <= MAX_SEED, String(seed)).toBe(true);
      seeds.add(seed);
    }
    // 200 campaigns (20 names x 10 creation times): no two share a seed base.
    expect(seeds.size).toBe(200);
  });

  it('accepts sample bodies and digests of the helpers, and rejects a wrong digest version', () => {
    const body = sampleBody('t1', 'qwen', 0);
    expect(SampleBody.parse(body)).toEqual(body);
    const digest = {
      v: 1,
      sampleId: body.sampleId,
      taskId: 't1',
      model: 'qwen',
      split: 'train',
      reward: 1,
      contentHash: body.contentHash,
      evalFingerprint: EVAL_FP,
      origin: 'p',
      seq: 1,
    };
    expect(Digest.parse(digest)).toEqual(digest);
    expect(fields(() => parseWith(Digest, { ...digest, v: 3, seq: 0 }, 'd'))).toContain('v');
    // Version 2 signs the task row's hash (protocol/task-fetch.ts): a v2 without one is refused.
    expect(fields(() => parseWith(Digest, { ...digest, v: 2 }, 'd'))).toEqual(['taskHash']);
  });
});
