// The advert's load split: a job whose samples all wait for a scoring slot is queued, not running
// (issue 12, build 7: `queued` was always 0). Pure accounting, driven through a real one-slot limiter.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { limiter } from '../../node/async/semaphore.ts';
import type { StreamHost } from '../../node/wire/streams.ts';
import { createJobExecutor } from '../../node/worker/executor.ts';
import { isQueued, jobLoad, newActivity, queueForScoring } from '../../node/worker/job-load.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { seededSigner } from '../helpers/digests.ts';
import { fakeModels, fakeScorer, until } from '../helpers/fake-worker.ts';
import { jobRequest, sampleTask } from '../helpers/samples.ts';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

const tick = () => new Promise((r) => setImmediate(r));
/** A job past generation with nothing left in the sandbox. */
const idle = { waiting: false, generating: false, scoring: 0, waitingToScore: 0 } as const;

describe('job load', () => {
  it('counts every admitted job once: queued + running = jobs; generating ones hold a slot', () => {
    const a = newActivity();
    const b = { ...idle, waitingToScore: 2 };
    const c = { ...idle, scoring: 1, waitingToScore: 3 };
    const d = { ...idle, generating: true, waitingToScore: 4 };
    const e = { ...idle, generating: true };
    expect(jobLoad([a, b, c, d, e], 4)).toEqual({
      queued: 2,
      running: 3,
      generating: 2,
      waiting: 1,
      capacity: 4,
    });
    expect(jobLoad([], 2)).toEqual({ queued: 0, running: 0, generating: 0, waiting: 0, capacity: 2 });
  });

  it('a job is queued only while it waits for a job slot, or everything it has left waits for a scoring slot', () => {
    expect(isQueued(newActivity())).toBe(true);
    expect(isQueued({ ...idle, generating: true })).toBe(false);
    expect(isQueued({ ...idle, waitingToScore: 1 })).toBe(true);
    expect(isQueued({ ...idle, generating: true, waitingToScore: 1 })).toBe(false);
    expect(isQueued({ ...idle, scoring: 1, waitingToScore: 1 })).toBe(false);
    // Finished, about to report: nothing waits.
    expect(isQueued(idle)).toBe(false);
  });

  it('two jobs, one scoring slot: the one waiting for the slot is queued until it gets it', async () => {
    const slot = limiter(1);
    const a = newActivity();
    const b = newActivity();
    const ga = gate();
    const gb = gate();
    const ticketA = queueForScoring(a);
    const ticketB = queueForScoring(b);
    a.waiting = false;
    b.waiting = false;
    // Generated, not yet handed to the limiter: each waits to score, and counts as queued.
    expect(jobLoad([a, b], 2)).toMatchObject({ queued: 2, running: 0 });
    const scoredA = ticketA.run(slot, () => ga.opened.then(() => 'a'));
    const scoredB = ticketB.run(slot, () => gb.opened.then(() => 'b'));
    await tick();
    expect([a, b]).toEqual([
      { ...idle, scoring: 1 },
      { ...idle, waitingToScore: 1 },
    ]);
    expect(jobLoad([a, b], 2)).toMatchObject({ queued: 1, running: 1, capacity: 2 });
    ga.open();
    expect(await scoredA).toBe('a');
    await tick();
    expect(jobLoad([a, b], 2)).toMatchObject({ queued: 0, running: 2, capacity: 2 });
    gb.open();
    expect(await scoredB).toBe('b');
    expect(b).toEqual(idle);
  });

  it('a failed score, a slot that fails before it starts, or a sample given up leaves the counts right', async () => {
    const a = { ...idle, generating: true };
    const failing = queueForScoring(a);
    await expect(
      failing.run(limiter(1), () => Promise.reject(new Error('box could not be set up'))),
    ).rejects.toThrow(/box could not be set up/);
    expect(a).toEqual({ ...idle, generating: true });
    const refusing = <T>(_fn: () => Promise<T>): Promise<T> => Promise.reject(new Error('aborted'));
    await expect(queueForScoring(a).run(refusing, () => Promise.resolve(1))).rejects.toThrow(/aborted/);
    expect(a).toEqual({ ...idle, generating: true });
    // Given up before the sandbox (unscorable, or the job failed first): leaving twice counts once.
    const given = queueForScoring(a);
    expect(a.waitingToScore).toBe(1);
    given.leave();
    given.leave();
    failing.leave();
    expect(a).toEqual({ ...idle, generating: true });
  });
});

describe('the executor: two jobs on a node with one scoring slot', () => {
  it('advertises the job whose samples all wait for the slot as queued, then running, then nothing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vt-load-'));
    const signer = await seededSigner(7);
    const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: signer.origin, signer });
    const task = sampleTask('t-load');
    // Scoring waits until the test lets each call go, in order.
    const gates: (() => void)[] = [];
    const scoring: Promise<void>[] = [];
    const scorer = fakeScorer(() => {
      const started = new Promise<void>((r) => gates.push(r));
      scoring.push(started);
      return started;
    });
    const models = fakeModels();
    const executor = createJobExecutor({
      host: { handle: async () => {}, unhandle: async () => {} } as unknown as StreamHost,
      peerId: signer.origin,
      models,
      scorer,
      workspaces: new Map([[task.workspace.id, dir]]),
      sampleLog,
      maxJobs: 2,
      maxScoring: 1,
    });
    const a = executor.local();
    const b = executor.local();
    try {
      await a.send({ ...jobRequest(task, signer.origin, [0, 1], 2), jobId: 'job-a' });
      await until(() => scoring.length === 1, 'job a scoring');
      await b.send({ ...jobRequest(task, signer.origin, [2, 3], 4), jobId: 'job-b' });
      // Job a holds the slot with a sample, job b has generated both and waits for it.
      await until(() => executor.load().running + executor.load().queued === 2, 'both jobs admitted');
      await tick();
      expect(executor.load()).toEqual({ queued: 1, running: 1, generating: 0, waiting: 0, capacity: 2 });
      // Let every score through, one at a time: the queued job runs, then both end.
      for (let done = 0; done < 4; done++) {
        await until(() => gates.length > done, `score ${done + 1} started`);
        gates[done]!();
      }
      await until(() => executor.load().running + executor.load().queued === 0, 'both jobs over');
      expect(executor.load()).toEqual({ queued: 0, running: 0, generating: 0, waiting: 0, capacity: 2 });
    } finally {
      for (const g of gates) g();
      await executor.stop();
      a.abort(new Error('test over'));
      b.abort(new Error('test over'));
      sampleLog.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
