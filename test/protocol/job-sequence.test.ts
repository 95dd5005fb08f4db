import { describe, expect, it } from 'vitest';
import type { WorkerMessage } from '../../protocol/job.ts';
import { createJobSequence, JobProtocolError } from '../../protocol/job-sequence.ts';
import { jobRequest, resultFor, sampleTask } from '../helpers/samples.ts';

const request = jobRequest(sampleTask('t1'), 'S', [1, 4, 6]);
const jobId = request.jobId;
const sample = (i: number, over: object = {}): WorkerMessage => ({
  type: 'sample',
  jobId,
  ...resultFor(request, i),
  ...over,
});

describe('job sequence', () => {
  it('follows accepted, samples in any order, end done', () => {
    const seq = createJobSequence(request);
    expect(seq.next({ type: 'accepted', jobId, worker: 'W' })).toEqual({ type: 'accepted' });
    expect(seq.accepted).toBe(true);
    seq.next({
      type: 'generated',
      jobId,
      index: 6,
      usage: { prompt: 1, completion: 1, cached: null },
      warm: false,
      latencyMs: 1,
      tokensPerSecond: 1,
    });
    seq.next(sample(6));
    seq.next(sample(1));
    expect(seq.missing()).toEqual([4]);
    seq.next(sample(4));
    expect(seq.next({ type: 'end', jobId, status: 'done' })).toMatchObject({ type: 'end', missing: [] });
    expect(seq.finished).toBe(true);
    expect(() => seq.next(sample(1))).toThrow(/sample after the job ended/);
  });

  it('takes scoring heartbeats only when the job asked for them, for requested samples not yet reported', () => {
    const beat = (samples: number[]): WorkerMessage => ({ type: 'scoring', jobId, samples });
    const plain = createJobSequence(request);
    plain.next({ type: 'accepted', jobId, worker: 'W' });
    expect(() => plain.next(beat([1]))).toThrow(/did not ask for/);

    const seq = createJobSequence({ ...request, beats: true });
    expect(() => seq.next(beat([1]))).toThrow(/before the job was accepted/);
    seq.next({ type: 'accepted', jobId, worker: 'W' });
    expect(seq.next(beat([1, 4]))).toEqual({ type: 'scoring', beat: beat([1, 4]) });
    expect(() => seq.next(beat([2]))).toThrow(/did not ask for/);
    expect(() => seq.next({ type: 'scoring', jobId: 'other', samples: [1] })).toThrow(JobProtocolError);
    seq.next(sample(1));
    expect(() => seq.next(beat([1]))).toThrow(/already reported/);
    expect(seq.missing()).toEqual([4, 6]);
  });

  it('reports the missing samples of a failed end, and accepts a refusal first', () => {
    const seq = createJobSequence(request);
    seq.next({ type: 'accepted', jobId, worker: 'W' });
    seq.next(sample(4));
    expect(
      seq.next({ type: 'end', jobId, status: 'failed', reason: 'model-error', message: '500' }),
    ).toMatchObject({
      missing: [1, 6],
    });
    const refused = createJobSequence(request);
    expect(refused.next({ type: 'refused', jobId: '', reason: 'full', message: 'busy' }).type).toBe(
      'refused',
    );
    expect(refused.finished).toBe(true);
  });

  it.each([
    ['a sample before acceptance', [sample(1)], /sample before the job was accepted/],
    ['a sample not asked for', ['accept', sample(2)], /sample for sample 2, which the job did not ask for/],
    ['a sample twice', ['accept', sample(1), sample(1)], /already reported/],
    ['a wrong seed', ['accept', sample(1, { seed: 5 })], /sample 1 has seed 5, expected 1001/],
    [
      'a forged sample id',
      ['accept', sample(1, { sampleId: resultFor(request, 4).sampleId })],
      /has sample id .* expected/,
    ],
    ['another job id', [{ type: 'accepted', jobId: 'other', worker: 'W' }], /accepted names job "other"/],
    [
      'done with samples missing',
      ['accept', sample(1), { type: 'end', jobId, status: 'done' }],
      /samples 4, 6 not reported/,
    ],
    ['accepted twice', ['accept', 'accept'], /accepted after the job was accepted/],
  ] as [string, (WorkerMessage | 'accept')[], RegExp][])('rejects %s', (_name, messages, error) => {
    const run = () => {
      const seq = createJobSequence(request);
      for (const m of messages) seq.next(m === 'accept' ? { type: 'accepted', jobId, worker: 'W' } : m);
    };
    expect(run).toThrow(JobProtocolError);
    expect(run).toThrow(error);
  });
});
