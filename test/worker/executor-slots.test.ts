// A node's job slots are generation slots: a job whose samples are all generated only waits for the
// sandbox, so the node takes its next job meanwhile (the model server does not idle through the
// scoring tail), and keeps at most maxJobs such jobs besides (node/worker/job-admission.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelService } from '../../node/models/service.ts';
import type { StreamHost } from '../../node/wire/streams.ts';
import { createJobExecutor, type JobExecutor } from '../../node/worker/executor.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import type { WorkerMessage } from '../../protocol/job.ts';
import type { Task } from '../../protocol/task.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { seededSigner } from '../helpers/digests.ts';
import {
  fakeModels,
  fakeScorer,
  heldScorer,
  localJob,
  stallingModels,
  until,
} from '../helpers/fake-worker.ts';
import { jobRequest, sampleTask } from '../helpers/samples.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Answers every sample at once; tasks whose prompt says `stall` hang after their first sample until aborted. */
function models(): ModelService {
  const instant = fakeModels();
  const stalling = stallingModels(1);
  return {
    adapterFor: () => ({}),
    generate: (request: { messages: { content: string }[] }) =>
      request.messages[0]!.content === 'stall'
        ? stalling.generate(request as never)
        : instant.generate(request as never),
  } as unknown as ModelService;
}

/** A model service that answers each sample only when the test calls `next()` (calls made early count). */
function steppedModels() {
  const instant = fakeModels();
  let credits = 0;
  let wake: () => void = () => {};
  const models = {
    adapterFor: () => ({}),
    async *generate(request: never) {
      for await (const sample of instant.generate(request)) {
        while (credits === 0)
          await new Promise<void>((r) => {
            wake = r;
          });
        credits--;
        yield sample;
      }
    },
  } as unknown as ModelService;
  return {
    models,
    next: () => {
      credits++;
      wake();
    },
  };
}

async function setup(scorer: Scorer, maxJobs: number, service: ModelService = models()) {
  const dir = await mkdtemp(join(tmpdir(), 'vt-exec-slots-'));
  const signer = await seededSigner(13);
  const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: signer.origin, signer });
  let loadChanges = 0;
  const ws = sampleTask('x').workspace.id;
  const executor = createJobExecutor({
    host: { handle: async () => {}, unhandle: async () => {} } as unknown as StreamHost,
    peerId: signer.origin,
    models: service,
    scorer,
    workspaces: new Map([[ws, '/ws']]),
    sampleLog,
    maxJobs,
    onLoadChange: () => loadChanges++,
  });
  cleanups.push(async () => {
    await executor.stop();
    sampleLog.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { executor, origin: signer.origin, loadChanges: () => loadChanges };
}

/** Sends a job for samples 0 and 1 of `task`; collects the answers until its end or refusal. */
function runJob(executor: JobExecutor, origin: string, task: Task) {
  return localJob(executor, jobRequest(task, origin, [0, 1], 2));
}

const generatedCount = (messages: WorkerMessage[]) => messages.filter((m) => m.type === 'generated').length;

const load = (queued: number, running: number, generating: number, waiting: number) => ({
  queued,
  running,
  generating,
  waiting,
  capacity: 1,
});

describe('job slots are generation slots', () => {
  it('takes the next job while the last one scores, up to maxJobs more and one waiting, and refuses beyond', async () => {
    const held = heldScorer();
    const { executor, origin, loadChanges } = await setup(held.scorer, 1);
    const a = runJob(executor, origin, sampleTask('t-a'));
    await until(() => generatedCount(a.messages) === 2, 'job a generated');
    // Both of a's samples reach the scorer (its two scoring slots) a moment after they are generated.
    await until(() => held.inFlight() === 2, "job a's two samples in the scorer");
    expect(executor.load()).toEqual(load(0, 1, 0, 0));
    // accepted, its slot taken, generation done: the advert learns of each.
    expect(loadChanges()).toBe(3);

    const b = runJob(executor, origin, sampleTask('t-b'));
    await until(() => generatedCount(b.messages) === 2, 'job b generated');
    expect(b.messages[0]).toMatchObject({ type: 'accepted' });
    // Two jobs in the sandbox, none generating: a's samples hold both scoring slots, b's wait for one.
    expect(executor.load()).toEqual(load(1, 1, 0, 0));

    // The bound on a one-slot node: 1 generating + 1 finishing its scoring + 1 waiting, in any mix.
    const c = runJob(executor, origin, sampleTask('t-c'));
    await until(() => generatedCount(c.messages) === 2, 'job c generated');
    const d = await runJob(executor, origin, sampleTask('t-d')).done;
    expect(d).toEqual([expect.objectContaining({ type: 'refused', reason: 'full' })]);
    expect(d[0]).toMatchObject({ message: '3 jobs admitted (3 finishing their scoring)' });

    held.release();
    for (const job of [a, b, c])
      expect((await job.done).at(-1)).toMatchObject({ type: 'end', status: 'done' });
    expect(executor.load()).toEqual(load(0, 0, 0, 0));
    const e = await runJob(executor, origin, sampleTask('t-e')).done;
    expect(e.at(-1)).toMatchObject({ type: 'end', status: 'done' });
  });

  it('a job still generating holds its slot: one more job waits for it, the next is refused', async () => {
    const held = heldScorer();
    const { executor, origin } = await setup(held.scorer, 1);
    const a = runJob(executor, origin, sampleTask('t-stall', 'stall'));
    await until(() => generatedCount(a.messages) === 1, 'job a generating');
    expect(executor.load()).toEqual(load(0, 1, 1, 0));
    const b = runJob(executor, origin, sampleTask('t-b'));
    await until(() => b.messages.length === 1, 'job b accepted');
    expect(b.messages).toEqual([expect.objectContaining({ type: 'accepted' })]);
    expect(executor.load()).toEqual(load(1, 1, 1, 1));
    const c = await runJob(executor, origin, sampleTask('t-c')).done;
    expect(c).toEqual([
      expect.objectContaining({
        type: 'refused',
        reason: 'full',
        message: '1 of 1 job slots busy, 1 job(s) waiting for one',
      }),
    ]);
    // The waiting job, cancelled, ends without generating anything and leaves the slot as it was.
    await b.cancel();
    expect((await b.done).map((m) => m.type)).toEqual(['accepted', 'end']);
    expect(b.messages.at(-1)).toMatchObject({ status: 'failed', reason: 'cancelled' });
    expect(executor.load()).toEqual(load(0, 1, 1, 0));
    // The stalled job, cancelled (its first sample's scoring let through), hands its slot to the next.
    await a.cancel();
    held.release();
    await a.done;
    expect((await runJob(executor, origin, sampleTask('t-d')).done).at(-1)).toMatchObject({
      type: 'end',
      status: 'done',
    });
  });

  it('frees the slot before it sends the last generated message (a submitter may place at once)', async () => {
    const held = heldScorer();
    const stepped = steppedModels();
    const { executor, origin } = await setup(held.scorer, 1, stepped.models);
    const wire = executor.local();
    await wire.send(jobRequest(sampleTask('t-a'), origin, [0, 1], 2));
    const seen: { type: string; generating: number }[] = [];
    for (let m = await wire.read(); m && m.type !== 'end'; m = await wire.read()) {
      // Read synchronously with the message: what a job sent on seeing it would find.
      seen.push({ type: m.type, generating: executor.load().generating });
      if (seen.length < 3) stepped.next();
      else held.release();
    }
    expect(seen.slice(0, 3)).toEqual([
      { type: 'accepted', generating: 1 },
      { type: 'generated', generating: 1 },
      { type: 'generated', generating: 0 },
    ]);
  });

  it('a generated sample waits to score from the moment its message is sent: the job is queued, not running', async () => {
    const held = heldScorer();
    const { executor, origin } = await setup(held.scorer, 1);
    const wire = executor.local();
    await wire.send(jobRequest(sampleTask('t-a'), origin, [0], 1));
    expect(await wire.read()).toMatchObject({ type: 'accepted' });
    // Read synchronously with the message, before the sample's hand-over to the scorer (a 0 ms timer
    // away): a load that said `running` here would name a job that has nothing in progress.
    expect(await wire.read()).toMatchObject({ type: 'generated' });
    expect(executor.load()).toEqual(load(1, 0, 0, 0));
    expect(held.started()).toBe(0);
    await until(() => held.inFlight() === 1, 'the sample in the scorer');
    expect(executor.load()).toEqual(load(0, 1, 0, 0));
    held.release();
    for (let m = await wire.read(); m; m = await wire.read()) if (m.type === 'end') break;
    expect(executor.load()).toEqual(load(0, 0, 0, 0));
  });

  it('a waiting job takes the slot the moment the job before it has generated its samples', async () => {
    const held = heldScorer();
    const stepped = steppedModels();
    const { executor, origin } = await setup(held.scorer, 1, stepped.models);
    const a = executor.local();
    await a.send(jobRequest(sampleTask('t-a'), origin, [0, 1], 2));
    expect(await a.read()).toMatchObject({ type: 'accepted' });
    const b = localJob(executor, jobRequest(sampleTask('t-b'), origin, [0, 1], 2));
    await until(() => b.messages.length === 1, 'job b accepted');
    expect(executor.load()).toMatchObject({ generating: 1, waiting: 1 });
    stepped.next();
    expect(await a.read()).toMatchObject({ type: 'generated' });
    expect(executor.load()).toMatchObject({ generating: 1, waiting: 1 });
    stepped.next();
    // Job a's last sample: job b holds the slot by the time the message arrives.
    expect(await a.read()).toMatchObject({ type: 'generated' });
    expect(executor.load()).toMatchObject({ generating: 1, waiting: 0 });
    await until(() => b.messages.length === 1, 'job b still has no sample');
    stepped.next();
    await until(() => generatedCount(b.messages) === 1, 'job b generating');
    stepped.next();
    held.release();
    expect((await b.done).at(-1)).toMatchObject({ type: 'end', status: 'done' });
    a.abort(new Error('test over'));
  });
});

/** Resolves after `n` promise hops (microtasks), as a chain of awaits does. */
async function afterHops(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await undefined;
}

/**
 * A model service that, like the real adapter, starts its next request as it hands a sample over: a
 * dozen promise hops later (its queue's and the openai client's awaits), and undici writes the request's bytes one event-loop
 * turn after that (a setImmediate; measured with a server in another process). `sent()` counts the
 * requests written so far.
 */
function requestingModels() {
  const instant = fakeModels();
  let sent = 0;
  const models = {
    adapterFor: () => ({}),
    async *generate(request: never) {
      for await (const sample of instant.generate(request)) {
        void afterHops(10).then(() => setImmediate(() => sent++));
        yield sample;
      }
    },
  } as unknown as ModelService;
  return { models, sent: () => sent };
}

describe('a sample makes way for the model request that follows it', () => {
  it('scoring starts only once the request started as the sample came has been written', async () => {
    const requesting = requestingModels();
    const seen: number[] = [];
    const inner = fakeScorer();
    const scorer: Scorer = {
      ...inner,
      score: (request) => {
        seen.push(requesting.sent());
        return inner.score(request);
      },
    };
    const { executor, origin } = await setup(scorer, 1, requesting.models);
    const answers = await localJob(executor, jobRequest(sampleTask('t-a'), origin, [0, 1, 2], 3)).done;
    expect(answers.at(-1)).toMatchObject({ type: 'end', status: 'done' });
    // Each sample's scoring (a sandbox spawn; for an unscorable one, the log's synchronous durable
    // write) began after the request its arrival started had left, not in front of it.
    expect(seen).toHaveLength(3);
    for (const [i, sent] of seen.entries()) expect(sent).toBeGreaterThan(i);
  });
});
