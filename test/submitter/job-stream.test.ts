import { type AddressInfo, createServer } from 'node:net';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { multiaddr } from '@multiformats/multiaddr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newPsk } from '../../node/data-dir.ts';
import { createHost, type Host } from '../../node/fleet/host.ts';
import { type JobEvent, submitJob } from '../../node/submitter/job-client.ts';
import { dialFramed, handleFramed } from '../../node/wire/streams.ts';
import { type JobRequest, MAX_JOB_FRAME_BYTES, SubmitterMessage, WorkerMessage } from '../../protocol/job.ts';
import { JOB_PROTOCOL } from '../../protocol/topics.ts';
import { type JobChannel, serveJobs } from '../helpers/job-worker.ts';
import { jobRequest, resultFor, sampleTask } from '../helpers/samples.ts';

const psk = newPsk();
const hosts: Host[] = [];
async function host(): Promise<Host> {
  const h = await createHost({
    privateKey: await generateKeyPair('Ed25519'),
    psk,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    mdns: false,
    topics: [],
  });
  hosts.push(h);
  return h;
}

/** Worker behaviours, chosen by task id. */
const behaviours: Record<string, (job: JobChannel) => Promise<void>> = {
  async ok(job) {
    await job.accept();
    for (const i of job.request.samples) {
      const r = resultFor(job.request, i);
      await job.generated({
        index: i,
        usage: r.usage,
        warm: r.warm,
        latencyMs: r.latencyMs,
        tokensPerSecond: r.tokensPerSecond,
      });
      await job.sample(r);
    }
    await job.done();
  },
  async nomodel(job) {
    await job.refuse('model-missing', `no model ${job.request.model} here`);
  },
  async crash(job) {
    await job.accept();
    await job.sample(resultFor(job.request, job.request.samples[0]!));
    throw new Error('model server returned 500 three times');
  },
  async slow(job) {
    await job.accept();
    await new Promise((resolve) => job.signal.addEventListener('abort', resolve, { once: true }));
    await job.fail('cancelled', String((job.signal.reason as Error).message));
  },
  async liar(job) {
    await job.accept();
    await job.sample({ ...resultFor(job.request, job.request.samples[0]!), seed: 1 }); // refused locally
  },
};

let worker: Host;
let submitter: Host;
const handled: string[] = [];
beforeAll(async () => {
  worker = await host();
  submitter = await host();
  await serveJobs(worker, {
    handler: async (job) => {
      handled.push(job.request.task.id);
      await behaviours[job.request.task.id]!(job);
    },
  });
});
afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
});

async function collect(events: AsyncIterable<JobEvent>): Promise<JobEvent[]> {
  const out: JobEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}
const req = (taskId: string, samples = [0, 2, 5], from = submitter): JobRequest =>
  jobRequest(sampleTask(taskId), from.peerId.toString(), samples);

describe('/vtnode/job/1 between a submitter and a worker', () => {
  it('runs a job: accepted, generated and scored samples in order, end done', async () => {
    const events = await collect(submitJob(submitter, worker.getMultiaddrs()[0]!, req('ok')));
    expect(events.map((e) => (e.type === 'sample' ? `sample ${e.result.index}` : e.type))).toEqual([
      'accepted',
      'generated',
      'sample 0',
      'generated',
      'sample 2',
      'generated',
      'sample 5',
      'end',
    ]);
    expect(events.at(-1)).toEqual({
      type: 'end',
      end: { type: 'end', jobId: 'ok#qwen#1', status: 'done' },
      missing: [],
    });
  });

  it('passes a refusal through', async () => {
    const events = await collect(submitJob(submitter, worker.peerId, req('nomodel')));
    expect(events).toEqual([{ type: 'refused', reason: 'model-missing', message: 'no model qwen here' }]);
  });

  it('refuses a malformed request or one that speaks for another submitter, naming the field', async () => {
    const wire = await dialFramed<typeof WorkerMessage, unknown>(submitter, worker.peerId, JOB_PROTOCOL, {
      schema: WorkerMessage,
      maxFrameBytes: MAX_JOB_FRAME_BYTES,
    });
    await wire.send({ ...req('ok'), samples: [3, 3], k: 0 });
    const reply = await wire.expect('a refusal');
    expect(reply).toMatchObject({ type: 'refused', jobId: '', reason: 'bad-request' });
    expect((reply as { message: string }).message).toMatch(
      /\/vtnode\/job\/1 message #1 from .*: k: .*samples/,
    );
    expect(await wire.read()).toBeUndefined();

    const forged = await collect(
      submitJob(submitter, worker.peerId, { ...req('ok'), submitter: '12D3KooWsomeoneelse' }),
    );
    expect(forged).toEqual([
      {
        type: 'refused',
        reason: 'bad-request',
        message: `submitter field says 12D3KooWsomeoneelse, but the stream comes from ${submitter.peerId.toString()}`,
      },
    ]);
    expect(handled).not.toContain('forged');
  });

  it('ends a job as failed with the missing samples when the worker handler throws', async () => {
    const events = await collect(submitJob(submitter, worker.peerId, req('crash')));
    expect(events.map((e) => e.type)).toEqual(['accepted', 'sample', 'end']);
    expect(events.at(-1)).toMatchObject({
      end: {
        status: 'failed',
        reason: 'internal',
        message: 'the worker failed: model server returned 500 three times',
      },
      missing: [2, 5],
    });
  });

  it('cancels a job: the worker sees the cancel and ends it', async () => {
    const controller = new AbortController();
    const events: JobEvent[] = [];
    for await (const e of submitJob(submitter, worker.peerId, req('slow'), { signal: controller.signal })) {
      events.push(e);
      if (e.type === 'accepted') controller.abort();
    }
    expect(events.at(-1)).toMatchObject({
      type: 'end',
      end: { status: 'failed', reason: 'cancelled', message: 'cancelled by the submitter' },
      missing: [0, 2, 5],
    });
  });

  it('stops a worker from sending a sample with the wrong seed (checked before it leaves)', async () => {
    const events = await collect(submitJob(submitter, worker.peerId, req('liar')));
    expect(events.map((e) => e.type)).toEqual(['accepted', 'end']);
    expect(events.at(-1)).toMatchObject({
      end: { reason: 'internal', message: expect.stringMatching(/has seed 1, expected 1000/) },
    });
  });
});

describe('submitter facing a bad or vanishing worker', () => {
  it('reports violations, silence, unreachable and vanished workers as lost, with the missing samples', async () => {
    const rogue = await host();
    let mode = 'extra';
    await handleFramed<typeof SubmitterMessage, WorkerMessage>(
      rogue,
      JOB_PROTOCOL,
      async (wire) => {
        const job = (await wire.expect('job')) as JobRequest;
        if (mode === 'silent') return new Promise(() => {});
        await wire.send({ type: 'accepted', jobId: job.jobId, worker: 'R' });
        if (mode === 'extra') await wire.send({ type: 'sample', jobId: job.jobId, ...resultFor(job, 7) });
        if (mode === 'forged')
          await wire.send({
            type: 'sample',
            jobId: job.jobId,
            ...resultFor(job, 0),
            sampleId: resultFor(job, 2).sampleId,
          });
        if (mode === 'vanish') await wire.send({ type: 'sample', jobId: job.jobId, ...resultFor(job, 2) });
        await new Promise(() => {});
      },
      { schema: SubmitterMessage, maxFrameBytes: MAX_JOB_FRAME_BYTES },
    );
    const addr = rogue.getMultiaddrs()[0]!;
    const last = async (opts = {}) => (await collect(submitJob(submitter, addr, req('r'), opts))).at(-1);

    expect(await last()).toMatchObject({
      type: 'lost',
      cause: 'violation',
      message: /sample 7, which the job did not ask for/,
      missing: [0, 2, 5],
    });
    mode = 'forged';
    expect(await last()).toMatchObject({
      type: 'lost',
      cause: 'violation',
      message: /sample 0 has sample id/,
    });
    mode = 'silent';
    expect(await last({ replyTimeoutMs: 300 })).toMatchObject({
      type: 'lost',
      cause: 'timeout',
      missing: [0, 2, 5],
    });
    mode = 'vanish';
    const events: JobEvent[] = [];
    for await (const e of submitJob(submitter, addr, req('r'))) {
      events.push(e);
      if (e.type === 'sample') await rogue.stop(); // the worker goes away mid-job
    }
    expect(events.map((e) => e.type)).toEqual(['accepted', 'sample', 'lost']);
    expect(events.at(-1)).toMatchObject({ cause: 'disconnected', missing: [0, 5] });
    // Nothing listens at its address any more: the process is gone.
    expect(await last()).toMatchObject({ type: 'lost', cause: 'no-listener', missing: [0, 2, 5] });
    // Something listens but is not a fleet member (it hangs up at once): unreachable, not gone.
    const stranger = createServer((socket) => socket.destroy());
    await new Promise<void>((r) => stranger.listen(0, '127.0.0.1', r));
    try {
      const port = (stranger.address() as AddressInfo).port;
      const fake = multiaddr(`/ip4/127.0.0.1/tcp/${port}/p2p/${rogue.peerId.toString()}`);
      const events = await collect(submitJob(submitter, fake, req('r')));
      expect(events).toMatchObject([{ type: 'lost', cause: 'unreachable', missing: [0, 2, 5] }]);
    } finally {
      stranger.close();
    }
  });
});
