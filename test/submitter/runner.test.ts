import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { afterEach, describe, expect, it } from 'vitest';
import { openCampaignStore } from '../../node/submitter/campaign-store.ts';
import { type CampaignRunnerOptions, runCampaign } from '../../node/submitter/runner.ts';
import type { Framed } from '../../node/wire/framed.ts';
import { localPair } from '../../node/wire/local.ts';
import type { Advert } from '../../protocol/advert.ts';
import { fingerprint } from '../../protocol/canonical.ts';
import {
  type JobRequest,
  type SampleGenerated,
  SubmitterMessage,
  type WorkerLoad,
  WorkerMessage,
} from '../../protocol/job.ts';
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

/** The scripted node: its advert's load (sent at time 0) and how many tasks the campaign has. */
interface Fleet {
  load?: Advert['load'];
  tasks?: number;
}

async function campaignOf(script: Script, extra: Partial<CampaignRunnerOptions> = {}, fleet: Fleet = {}) {
  const self = peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString();
  const tasks = Array.from({ length: fleet.tasks ?? 1 }, (_, i) => sampleTask(`t${i + 1}`, `prompt ${i}`));
  const task = tasks[0]!;
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
    tasks: tasks.map((t) => ({ id: t.id, promptFingerprint: t.promptFingerprint, split: t.split })),
    now: Date.now(),
  });
  const load = fleet.load ?? { queued: 0, running: 0, capacity: 2 };
  const node = {
    ...fleetNode(advert(self, { models: [model()], workspaces: [task.workspace.id], load })),
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
    tasks: new Map(tasks.map((t) => [t.id, t])),
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

  it('places the next job on a one-slot node as soon as every sample of its job is generated', async () => {
    let worker = '';
    const order: string[] = [];
    let releaseFirst!: () => void;
    const firstMayEnd = new Promise<void>((r) => {
      releaseFirst = r;
    });
    const { runner, self } = await campaignOf(
      async (wire, job) => {
        order.push(`${job.task.id} placed`);
        await wire.send({ type: 'accepted', jobId: job.jobId, worker });
        for (const index of job.samples) await wire.send(generated(job, index));
        // The first job scores until the second is placed: the node's one slot is free meanwhile.
        if (job.task.id === 't1') await firstMayEnd;
        else releaseFirst();
        for (const index of job.samples)
          await wire.send({ type: 'sample', jobId: job.jobId, ...resultFor(job, index) });
        await wire.send({ type: 'end', jobId: job.jobId, status: 'done' });
        order.push(`${job.task.id} ended`);
        await wire.closeWrite();
      },
      {},
      { load: { queued: 0, running: 0, generating: 0, capacity: 1 }, tasks: 2 },
    );
    worker = self;
    await expect(runner.done).resolves.toMatchObject({ status: 'done', exhausted: 0 });
    expect(order.slice(0, 2)).toEqual(['t1 placed', 't2 placed']);
  });

  it('counts the load a worker reports with its job messages when it is newer than its advert', async () => {
    let worker = '';
    const order: string[] = [];
    const { runner, self } = await campaignOf(
      async (wire, job) => {
        order.push(`${job.task.id} placed`);
        await wire.send({ type: 'accepted', jobId: job.jobId, worker });
        // Another submitter's job took the slot this one frees: the load says so, and no job fits.
        const busy = { queued: 0, running: 2, generating: 1, capacity: 1, at: Date.now() };
        for (const index of job.samples) await wire.send({ ...generated(job, index), load: busy });
        await new Promise((r) => setTimeout(r, 100));
        order.push(`${job.task.id} scored`);
        for (const index of job.samples)
          await wire.send({ type: 'sample', jobId: job.jobId, ...resultFor(job, index) });
        const free: WorkerLoad = { queued: 0, running: 0, generating: 0, capacity: 1, at: Date.now() };
        await wire.send({ type: 'end', jobId: job.jobId, status: 'done', load: free });
        await wire.closeWrite();
      },
      {},
      { load: { queued: 0, running: 0, generating: 0, capacity: 1 }, tasks: 2 },
    );
    worker = self;
    await expect(runner.done).resolves.toMatchObject({ status: 'done', exhausted: 0 });
    expect(order).toEqual(['t1 placed', 't1 scored', 't2 placed', 't2 scored']);
  });
});

/** The `generated` progress message of sample `index` of `job`. */
function generated(job: JobRequest, index: number): SampleGenerated {
  return {
    type: 'generated',
    jobId: job.jobId,
    index,
    usage: { prompt: 100, completion: 10, cached: null },
    warm: false,
    latencyMs: 10,
    tokensPerSecond: 100,
  };
}
