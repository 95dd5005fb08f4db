// A job outlives its stream (issue 11, Build 3): the worker side of /vtnode/job/1 keeps running a job
// whose stream broke, and a new stream for the same job re-attaches to it. In-memory framed stream
// pairs (the ones a node uses for jobs on itself); every stream is checked with the submitter's own
// protocol checker, so a duplicate, a missing sample or a misordered `end` fails the test.
import { describe, expect, it } from 'vitest';
import type { Framed } from '../../node/wire/framed.ts';
import { localPair } from '../../node/wire/local.ts';
import { createJobRun, type JobFailureEnd } from '../../node/worker/job-run.ts';
import {
  type JobRequest,
  type SampleResult,
  SubmitterMessage,
  type SubmitterMessage as SubmitterMessageType,
  WorkerMessage,
} from '../../protocol/job.ts';
import { createJobSequence, type JobStep } from '../../protocol/job-sequence.ts';
import { JOB_PROTOCOL } from '../../protocol/topics.ts';
import { until } from '../helpers/fake-worker.ts';
import { notYet, pollFor } from '../helpers/poll.ts';
import { jobRequest, resultFor, sampleTask } from '../helpers/samples.ts';

const SUBMITTER = '12D3KooWsubmitter';
const job = jobRequest(sampleTask('t1'), SUBMITTER, [0, 1, 2, 3, 4, 5], 6);

/** One stream of the job: the worker's end, and what the submitter's end reads, checked. */
function stream(request: JobRequest) {
  const [submitterSide, workerSide] = localPair({
    aReads: WorkerMessage,
    bReads: SubmitterMessage,
    protocol: JOB_PROTOCOL,
    peer: SUBMITTER,
  });
  const sequence = createJobSequence(request);
  const steps: JobStep[] = [];
  let ended!: (err: Error | null) => void;
  const over = new Promise<Error | null>((resolve) => {
    ended = resolve;
  });
  void (async () => {
    try {
      for (;;) {
        const message = await submitterSide.read();
        if (message === undefined) break;
        steps.push(sequence.next(message));
      }
      ended(null);
    } catch (err) {
      ended(err as Error);
    }
  })();
  const samples = () => steps.flatMap((s) => (s.type === 'sample' ? [s.result.index] : []));
  return {
    worker: workerSide as Framed<SubmitterMessageType, WorkerMessage>,
    submitter: submitterSide,
    steps,
    samples,
    /** Resolves with the stream's error (a protocol violation included), or null after a clean end. */
    over,
    async until(predicate: () => boolean, what: string) {
      await pollFor(() => predicate() || notYet(steps), { what, timeoutMs: 5000, pauseMs: 5 });
    },
  };
}

/** A job run over an in-memory sample log; `score(i)` makes sample i durable and reports it. */
function run(leaseMs = 10_000) {
  const log = new Map<number, SampleResult>();
  const events: string[] = [];
  const r = createJobRun({
    job,
    worker: 'W',
    leaseMs,
    logged: (index) => log.get(index),
    onCancel: () => events.push('cancel'),
    onAbandoned: () => events.push('abandoned'),
  });
  const score = (index: number) => {
    const result: SampleResult = { type: 'sample', jobId: job.jobId, ...resultFor(job, index) };
    log.set(index, result);
    r.scored(result);
  };
  const generated = (index: number) => {
    const { usage, warm, latencyMs, tokensPerSecond } = resultFor(job, index);
    r.generated({ type: 'generated', jobId: job.jobId, index, usage, warm, latencyMs, tokensPerSecond });
  };
  return { r, score, generated, events, log };
}

const remaining = (request: JobRequest, samples: number[]): JobRequest => ({ ...request, samples });

describe('a job and its stream', () => {
  it('one stream: accepted, progress and samples as they come, then end done', async () => {
    const { r, score, generated } = run();
    const s = stream(job);
    const attached = r.attach(s.worker, job.samples);
    for (const i of job.samples) {
      generated(i);
      score(i);
    }
    r.finish(null);
    expect(await s.over).toBeNull();
    await attached;
    expect(s.steps.map((x) => x.type)).toEqual([
      'accepted',
      ...job.samples.flatMap(() => ['generated', 'sample']),
      'end',
    ]);
    expect(s.steps.at(-1)).toMatchObject({ end: { status: 'done' } });
  });

  it('scoring heartbeats go only to a stream whose job asked for them, naming its samples not yet reported', async () => {
    const beats = { ...job, beats: true };
    const { r, score } = run();
    const plain = stream(job);
    const attachedPlain = r.attach(plain.worker, job.samples);
    r.scoring([0, 1]);
    score(0);
    await plain.until(() => plain.samples().length === 1, 'sample 0');
    expect(plain.steps.some((x) => x.type === 'scoring')).toBe(false);
    // A re-attach whose request takes heartbeats: they name wanted samples not yet reported, ascending.
    const s = stream(beats);
    const attached = r.attach(s.worker, [0, 1, 2], job.jobId, true);
    r.scoring([2, 0, 1, 5]);
    await s.until(() => s.steps.some((x) => x.type === 'scoring'), 'a heartbeat');
    expect(s.steps.find((x) => x.type === 'scoring')).toEqual({
      type: 'scoring',
      beat: { type: 'scoring', jobId: job.jobId, samples: [1, 2] },
    });
    for (const i of [1, 2]) score(i);
    r.scoring([1]);
    r.finish({ reason: 'internal', message: 'stop' });
    expect(await s.over).toBeNull();
    await Promise.all([attached, attachedPlain]);
    expect(s.steps.filter((x) => x.type === 'scoring')).toHaveLength(1);
  });

  it('garbage from the submitter mid-job detaches the stream, the job goes on, and attach rejects with the offence', async () => {
    const { r, score } = run();
    const first = stream(job);
    const attached = r.attach(first.worker, job.samples);
    score(0);
    await first.until(() => first.samples().length === 1, 'one sample');
    // Valid JSON of the wrong shape, as a hostile or buggy submitter would send it.
    await first.submitter.send({ type: 'cancel', jobId: 42 } as unknown as SubmitterMessageType);
    await expect(attached).rejects.toThrow(/jobId/);
    expect(r.attached).toBe(false);
    // The job was not cancelled: a re-attach gets everything.
    score(1);
    const again = stream(job);
    const reattached = r.attach(again.worker, job.samples);
    for (const i of [2, 3, 4, 5]) score(i);
    r.finish(null);
    expect(await again.over).toBeNull();
    await reattached;
    expect(again.samples().sort()).toEqual(job.samples);
  });

  it('the stream breaks mid-job: the job goes on; a re-attach gets what was scored meanwhile, then the rest, once each', async () => {
    const { r, score, events } = run();
    const first = stream(job);
    const firstAttached = r.attach(first.worker, job.samples);
    score(0);
    score(1);
    await first.until(() => first.samples().length === 2, 'two samples');
    // The connection drops (the submitter's side is reset).
    first.submitter.abort(new Error('connection reset'));
    await firstAttached;
    expect(r.attached).toBe(false);
    score(2);
    score(3);
    // The submitter re-attaches asking for what it is missing.
    const again = remaining(job, [2, 3, 4, 5]);
    const second = stream(again);
    const secondAttached = r.attach(second.worker, again.samples);
    expect(r.attached).toBe(true);
    score(4);
    score(5);
    r.finish(null);
    expect(await second.over).toBeNull();
    await secondAttached;
    expect(second.samples()).toEqual([2, 3, 4, 5]);
    expect(second.steps.at(-1)).toMatchObject({ end: { status: 'done' }, missing: [] });
    expect(events).toEqual([]);
  });

  it('a stream that breaks while the submitter does not notice (half-open) is superseded by the re-attach', async () => {
    const { r, score } = run();
    const stale = stream(job);
    void r.attach(stale.worker, job.samples);
    score(0);
    const fresh = stream(remaining(job, [1, 2, 3, 4, 5]));
    const attached = r.attach(fresh.worker, [1, 2, 3, 4, 5]);
    // The old stream is reset by the worker: the submitter's old reader ends with an error.
    expect(await stale.over).toBeInstanceOf(Error);
    for (const i of [1, 2, 3, 4, 5]) score(i);
    r.finish(null);
    expect(await fresh.over).toBeNull();
    await attached;
    expect(fresh.samples()).toEqual([1, 2, 3, 4, 5]);
  });

  it('a re-attach asking again for samples it already had gets them again (the submitter counts them once)', async () => {
    const { r, score } = run();
    const first = stream(job);
    void r.attach(first.worker, job.samples);
    score(0);
    score(1);
    await first.until(() => first.samples().length === 2, 'two samples');
    first.submitter.abort(new Error('reset'));
    const second = stream(job);
    void r.attach(second.worker, job.samples);
    for (const i of [2, 3, 4, 5]) score(i);
    r.finish(null);
    expect(await second.over).toBeNull();
    expect(second.samples().sort()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('a new job of the submitter for the same samples takes the run over, under its own job id', async () => {
    const { r, score } = run();
    const first = stream(job);
    void r.attach(first.worker, job.samples);
    score(0);
    await first.until(() => first.samples().length === 1, 'one sample');
    first.submitter.abort(new Error('the submitter died'));
    score(1);
    // The restarted submitter places the unfinished samples again as attempt 2.
    const placedAgain = { ...job, jobId: job.jobId.replace(/#1$/, '#2'), samples: [1, 2, 3, 4, 5] };
    const second = stream(placedAgain);
    void r.attach(second.worker, placedAgain.samples, placedAgain.jobId);
    for (const i of [2, 3, 4, 5]) score(i);
    r.finish(null);
    // The checker of the second stream requires its own job id on every message.
    expect(await second.over).toBeNull();
    expect(second.samples()).toEqual([1, 2, 3, 4, 5]);
    expect(second.steps.at(-1)).toMatchObject({ end: { jobId: placedAgain.jobId, status: 'done' } });
  });

  it('samples scored while the replay is being sent are sent once, before the end', async () => {
    const { r, score } = run();
    for (const i of [0, 1, 2]) score(i); // scored before any stream (nobody attached)
    const s = stream(job);
    void r.attach(s.worker, job.samples);
    score(3);
    score(4);
    score(5);
    r.finish(null);
    expect(await s.over).toBeNull();
    expect(s.samples().sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(s.steps.at(-1)!.type).toBe('end');
  });

  it('attached after the job finished: the scored samples, then its end', async () => {
    const { r, score } = run();
    for (const i of job.samples) score(i);
    r.finish(null);
    const s = stream(job);
    await r.attach(s.worker, job.samples);
    expect(await s.over).toBeNull();
    expect(s.samples()).toEqual(job.samples);
    expect(s.steps.at(-1)).toMatchObject({ end: { status: 'done' } });
  });

  it('a failed job ends failed with its reason, after the samples it did score', async () => {
    const { r, score } = run();
    const s = stream(job);
    void r.attach(s.worker, job.samples);
    score(0);
    const failure: JobFailureEnd = { reason: 'model-error', message: 'HTTP 500 three times' };
    r.finish(failure);
    expect(await s.over).toBeNull();
    expect(s.samples()).toEqual([0]);
    expect(s.steps.at(-1)).toMatchObject({
      end: { status: 'failed', reason: 'model-error', message: 'HTTP 500 three times' },
      missing: [1, 2, 3, 4, 5],
    });
  });

  it('no stream for the lease: the job is abandoned; a stream back in time keeps it', async () => {
    // A lease well above the 30 ms gap (a loaded machine may run a 30 ms timer late), then past it.
    const kept = run(400);
    const a = stream(job);
    void kept.r.attach(a.worker, job.samples);
    a.submitter.abort(new Error('reset'));
    await new Promise((r) => setTimeout(r, 30));
    const b = stream(job);
    void kept.r.attach(b.worker, job.samples);
    await new Promise((r) => setTimeout(r, 600));
    expect(kept.events).toEqual([]);

    const lost = run(50);
    const c = stream(job);
    void lost.r.attach(c.worker, job.samples);
    c.submitter.abort(new Error('reset'));
    await until(
      () => lost.events.length > 0,
      'the lost job given up',
      () => lost.events,
    );
    expect(lost.events).toEqual(['abandoned']);
  });

  it('a cancel on the current stream cancels; a close before the end only detaches (a dropped connection looks the same)', async () => {
    const viaCancel = run();
    const a = stream(job);
    void viaCancel.r.attach(a.worker, job.samples);
    await a.submitter.send({ type: 'cancel', jobId: job.jobId });
    await a.until(() => viaCancel.events.length > 0, 'the cancel');
    expect(viaCancel.events).toEqual(['cancel']);

    // A lease long enough that the detach is seen before it runs out (even on a loaded machine).
    const viaClose = run(300);
    const b = stream(job);
    void viaClose.r.attach(b.worker, job.samples);
    await b.submitter.closeWrite();
    await b.until(() => !viaClose.r.attached, 'the detach');
    expect(viaClose.events).toEqual([]);
    // ... and with nobody back within the lease, the job is given up.
    await until(
      () => viaClose.events.length > 0,
      'the detached job given up',
      () => viaClose.events,
    );
    expect(viaClose.events).toEqual(['abandoned']);

    const superseded = run();
    const old = stream(job);
    void superseded.r.attach(old.worker, job.samples);
    const fresh = stream(job);
    void superseded.r.attach(fresh.worker, job.samples);
    await old.submitter.send({ type: 'cancel', jobId: job.jobId }).catch(() => {});
    await new Promise((r) => setTimeout(r, 20));
    // A cancel on a stream the job no longer uses is ignored.
    expect(superseded.events).toEqual([]);
    expect(superseded.r.attached).toBe(true);
    // The current stream still gets the job's end.
    superseded.r.finish({ reason: 'shutdown', message: 'the node is stopping' });
    expect(await fresh.over).toBeNull();
    expect(fresh.steps.at(-1)).toMatchObject({ end: { status: 'failed', reason: 'shutdown' } });
  });
});
