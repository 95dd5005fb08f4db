import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { afterEach, describe, expect, it } from 'vitest';
import { openCampaignStore } from '../../node/submitter/campaign-store.ts';
import { type CampaignRunnerOptions, runCampaign } from '../../node/submitter/runner.ts';
import type { Framed } from '../../node/wire/framed.ts';
import { localPair } from '../../node/wire/local.ts';
import { fingerprint } from '../../protocol/canonical.ts';
import { type JobRequest, SubmitterMessage, WorkerMessage } from '../../protocol/job.ts';
import { JOB_PROTOCOL } from '../../protocol/topics.ts';
import { advert, fleetNode, MODEL, model } from '../helpers/adverts.ts';
import { resultFor, sampleTask } from '../helpers/samples.ts';

// The runner in one process: the submitter is its own only worker, reached by the in-memory job
// stream (`local`) a node uses for itself, so a scripted worker can misbehave in ways a real
// executor never does.

type WorkerSide = Framed<SubmitterMessage, WorkerMessage>;
/** What a scripted worker does with one job stream. */
type Script = (wire: WorkerSide, job: JobRequest) => Promise<void>;

const K = 3;
const stores: { close(): void }[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
});

async function campaignOf(script: Script, extra: Partial<CampaignRunnerOptions> = {}) {
  const self = peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString();
  const task = sampleTask('t1');
  const store = openCampaignStore({ path: ':memory:' });
  stores.push(store);
  const { campaign } = store.start({
    spec: {
      name: 'c1',
      tasksHash: fingerprint('tasks'),
      models: [MODEL],
      k: K,
      sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase: 1000 },
      split: 'all',
    },
    tasks: [{ id: task.id, promptFingerprint: task.promptFingerprint, split: task.split }],
    now: Date.now(),
  });
  const node = {
    ...fleetNode(advert(self, { models: [model()], workspaces: [task.workspace.id] })),
    self: true,
  };
  const streams: WorkerSide[] = [];
  const local = () => {
    const [submitter, worker] = localPair({
      aReads: WorkerMessage,
      bReads: SubmitterMessage,
      protocol: JOB_PROTOCOL,
      peer: self,
    });
    streams.push(worker);
    void (async () => {
      const job = await worker.read();
      if (job?.type === 'job') await script(worker, job);
    })().catch(() => {});
    return submitter;
  };
  const runner = runCampaign({
    campaign,
    tasks: new Map([[task.id, task]]),
    peerId: self,
    nodes: () => [node],
    host: {} as CampaignRunnerOptions['host'],
    local,
    hedge: false,
    ...extra,
  });
  return { runner, campaign, self, streams };
}

/** Accepts the job and reports every sample asked for, as the executor does. */
async function reportAll(wire: WorkerSide, job: JobRequest, worker: string): Promise<void> {
  await wire.send({ type: 'accepted', jobId: job.jobId, worker });
  for (const index of job.samples)
    await wire.send({ type: 'sample', jobId: job.jobId, ...resultFor(job, index) });
}

describe('the campaign runner with a scripted worker', () => {
  it('a worker that reports every sample and ends the job finishes the campaign', async () => {
    let worker = '';
    const { runner, campaign, self } = await campaignOf(async (wire, job) => {
      await reportAll(wire, job, worker);
      await wire.send({ type: 'end', jobId: job.jobId, status: 'done' });
      await wire.closeWrite();
    });
    worker = self;
    await expect(runner.done).resolves.toMatchObject({ status: 'done', exhausted: 0 });
    expect(campaign.summary().samples).toMatchObject({ scored: K });
  });

  it('a worker that reports every sample but never ends the job, nor heeds a cancel, cannot hold the campaign open', async () => {
    let worker = '';
    const seen: string[] = [];
    let reset: Error | null = null;
    const { runner, campaign, self } = await campaignOf(
      async (wire, job) => {
        await reportAll(wire, job, worker);
        // No `end`, the stream left open; a cancel is read and ignored.
        try {
          for (let m = await wire.read(); m; m = await wire.read()) seen.push(m.type);
        } catch (err) {
          reset = err as Error;
        }
      },
      { endGraceMs: 100 },
    );
    worker = self;
    await expect(runner.done).resolves.toMatchObject({ status: 'done', exhausted: 0 });
    expect(campaign.summary().samples).toMatchObject({ scored: K });
    // It was asked to stop first (cancel), then its stream was reset.
    expect(seen).toEqual(['cancel']);
    await expect.poll(() => reset).not.toBeNull();
  }, 30_000);
});
