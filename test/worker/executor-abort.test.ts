// A job aborted while some of its samples still generate. The model adapter then throws (AbortedError)
// out of the generation instead of ending it; the executor used to let that error end the job at
// once: the end said `internal: aborted` whatever the cause (a scoring infrastructure failure lost its
// reason and message), and the job was over (its end sent, stop() done, the log closed next) while
// the samples already generated were still being scored, to be logged after the end.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { StreamHost } from '../../node/wire/streams.ts';
import { createJobExecutor } from '../../node/worker/executor.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { seededSigner } from '../helpers/digests.ts';
import { fakeScorer, heldScorer, localJob, stallingModels, until } from '../helpers/fake-worker.ts';
import { jobRequest, sampleTask } from '../helpers/samples.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const TASK = sampleTask('t-abort');

/** An executor whose model service answers sample 0 of a job, then hangs until the job is aborted. */
async function setup(scorer: Scorer) {
  const dir = await mkdtemp(join(tmpdir(), 'vt-exec-abort-'));
  const signer = await seededSigner(12);
  const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: signer.origin, signer });
  const executor = createJobExecutor({
    host: { handle: async () => {}, unhandle: async () => {} } as unknown as StreamHost,
    peerId: signer.origin,
    models: stallingModels(1),
    scorer,
    workspaces: new Map([[TASK.workspace.id, '/ws']]),
    sampleLog,
    maxJobs: 2,
  });
  cleanups.push(async () => {
    await executor.stop();
    sampleLog.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { executor, origin: signer.origin, sampleLog };
}

/** Sends a job for samples 0 and 1 on a local stream; collects the answers until the end. */
function runJob(executor: ReturnType<typeof createJobExecutor>, origin: string) {
  return localJob(executor, jobRequest(TASK, origin, [0, 1], 2));
}

describe('a job aborted while its samples still generate', () => {
  it('ends with the cause of the abort: a scoring infrastructure failure is a sandbox error', async () => {
    const broken: Scorer = {
      ...fakeScorer(),
      score: async (request) => ({
        ...(await fakeScorer().score(request)),
        status: 'error',
        reward: null,
        error: 'the box could not be set up',
      }),
    };
    const { executor, origin } = await setup(broken);
    const messages = await runJob(executor, origin).done;
    expect(messages.filter((m) => m.type === 'sample')).toEqual([]);
    expect(messages.at(-1)).toMatchObject({
      type: 'end',
      status: 'failed',
      reason: 'sandbox-error',
      message: 'scoring failed for infrastructure reasons: the box could not be set up',
    });
  });

  it('when cancelled, ends only once the sample being scored is done, and reports it first', async () => {
    const held = heldScorer();
    const { executor, origin, sampleLog } = await setup(held.scorer);
    const job = runJob(executor, origin);
    await until(() => held.started() === 1, 'sample 0 in the sandbox');
    await job.cancel();
    await new Promise((r) => setTimeout(r, 50));
    // The sandbox run of sample 0 is still winding down: the job is not over.
    expect(job.messages.map((m) => m.type)).toEqual(['accepted', 'generated']);
    held.release();
    const messages = await job.done;
    expect(messages.map((m) => m.type)).toEqual(['accepted', 'generated', 'sample', 'end']);
    expect(messages.at(-1)).toMatchObject({ status: 'failed', reason: 'cancelled', message: 'cancelled' });
    expect(sampleLog.counts().samples).toBe(1);
  });

  it('when the node stops, stop() returns only once no sample of it is being scored', async () => {
    const held = heldScorer();
    const { executor, origin } = await setup(held.scorer);
    const job = runJob(executor, origin);
    await until(() => held.started() === 1, 'sample 0 in the sandbox');
    setTimeout(() => held.release(), 50);
    await executor.stop();
    // The caller closes the sample log next: nothing of the job may write to it any more.
    expect(held.inFlight()).toBe(0);
    expect((await job.done).at(-1)).toMatchObject({
      status: 'failed',
      reason: 'shutdown',
      message: 'shutdown',
    });
  });
});
