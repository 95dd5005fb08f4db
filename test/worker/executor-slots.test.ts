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
import { fakeModels, heldScorer, localJob, stallingModels, until } from '../helpers/fake-worker.ts';
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

/** A model service that answers each sample only when the test calls `next()`. */
function steppedModels() {
  const instant = fakeModels();
  let step: () => void = () => {};
  const models = {
    adapterFor: () => ({}),
    async *generate(request: never) {
      for await (const sample of instant.generate(request)) {
        await new Promise<void>((r) => {
          step = r;
        });
        yield sample;
      }
    },
  } as unknown as ModelService;
  return { models, next: () => step() };
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

describe('job slots are generation slots', () => {
  it('takes the next job while the last one scores, up to maxJobs more, and refuses beyond', async () => {
    const held = heldScorer();
    const { executor, origin, loadChanges } = await setup(held.scorer, 1);
    const a = runJob(executor, origin, sampleTask('t-a'));
    await until(() => generatedCount(a.messages) === 2, 'job a generated');
    expect(executor.load()).toEqual({ queued: 0, running: 1, generating: 0, capacity: 1 });
    // accepted, then generation done: the advert learns of both.
    expect(loadChanges()).toBe(2);

    const b = runJob(executor, origin, sampleTask('t-b'));
    await until(() => generatedCount(b.messages) === 2, 'job b generated');
    expect(b.messages[0]).toMatchObject({ type: 'accepted' });
    // Two jobs in the sandbox, none generating: a's samples hold both scoring slots, b's wait for one.
    expect(executor.load()).toEqual({ queued: 1, running: 1, generating: 0, capacity: 1 });

    const c = await runJob(executor, origin, sampleTask('t-c')).done;
    expect(c).toEqual([expect.objectContaining({ type: 'refused', reason: 'full' })]);
    expect(c[0]).toMatchObject({ message: '2 jobs admitted (2 finishing their scoring)' });

    held.release();
    for (const job of [a, b]) expect((await job.done).at(-1)).toMatchObject({ type: 'end', status: 'done' });
    expect(executor.load()).toEqual({ queued: 0, running: 0, generating: 0, capacity: 1 });
    const d = await runJob(executor, origin, sampleTask('t-d')).done;
    expect(d.at(-1)).toMatchObject({ type: 'end', status: 'done' });
  });

  it('a job still generating holds its slot: the next job is refused until it is over', async () => {
    const held = heldScorer();
    const { executor, origin } = await setup(held.scorer, 1);
    const a = runJob(executor, origin, sampleTask('t-stall', 'stall'));
    await until(() => generatedCount(a.messages) === 1, 'job a generating');
    expect(executor.load()).toEqual({ queued: 0, running: 1, generating: 1, capacity: 1 });
    const b = await runJob(executor, origin, sampleTask('t-b')).done;
    expect(b).toEqual([
      expect.objectContaining({ type: 'refused', reason: 'full', message: '1 of 1 job slots busy' }),
    ]);
    held.release();
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
});
