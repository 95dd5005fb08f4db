// Jobs infrastructure benchmark (one run, ratios against baselines measured in the same run):
//   npx node bench/jobs.ts [--samples 2000] [--messages 10000]
// 1. Worker sample log: durable appends/s (node:sqlite, WAL, synchronous=FULL) ÷ appends/s of the
//    simplest durable alternative, a JSONL file with fsync after every line.
// 2. Framed JSON over a libp2p stream (zod-parsed on receipt): messages/s ÷ raw length-prefixed
//    bytes over the same kind of stream (no JSON, no zod).
// 3. Campaign store: results recorded/s for 500 tasks × k = 8, and the time of one summary.
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { decode, encode } from 'it-length-prefixed';
import { newPsk } from '../node/data-dir.ts';
import { digestSigner } from '../node/digests/signature.ts';
import { createHost } from '../node/fleet/host.ts';
import { openCampaignStore } from '../node/submitter/campaign-store.ts';
import { framed } from '../node/wire/framed.ts';
import { openSampleLog } from '../node/worker/sample-log.ts';
import { fingerprint } from '../protocol/canonical.ts';
import { SampleResult, sampleSeed } from '../protocol/job.ts';
import { jobRequest, resultFor, sampleBody, sampleTask } from '../test/helpers/samples.ts';

const { values } = parseArgs({
  options: { samples: { type: 'string', default: '2000' }, messages: { type: 'string', default: '10000' } },
});
const nSamples = Number(values.samples);
const nMessages = Number(values.messages);
if (!Number.isInteger(nSamples) || nSamples < 1 || !Number.isInteger(nMessages) || nMessages < 1) {
  process.stderr.write('usage: npx node bench/jobs.ts [--samples N] [--messages N]\n');
  process.exit(2);
}
const dir = await mkdtemp(join(tmpdir(), 'vt-bench-jobs-'));
const rate = (n: number, ms: number) => Math.round((n / ms) * 1000);

try {
  // 1. Sample log vs fsync'd JSONL.
  const bodies = Array.from({ length: nSamples }, (_, i) =>
    sampleBody(`task-${i >> 3}`, 'qwen', i % 8, {
      candidate: `export const f${i} = () => ${i};\n`.repeat(40),
    }),
  );
  const fd = openSync(join(dir, 'baseline.jsonl'), 'a');
  let t0 = performance.now();
  for (const b of bodies) {
    writeSync(fd, `${JSON.stringify(b)}\n`);
    fsyncSync(fd);
  }
  const jsonlMs = performance.now() - t0;
  closeSync(fd);
  // Every append signs its digest (Ed25519), as a worker's log does.
  const signer = digestSigner(await generateKeyPair('Ed25519'));
  const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: signer.origin, signer });
  t0 = performance.now();
  for (const b of bodies) sampleLog.append(b);
  const logMs = performance.now() - t0;
  t0 = performance.now();
  let read = 0;
  for (let after = 0; ; ) {
    const batch = sampleLog.digestsSince(after, 500);
    if (batch.length === 0) break;
    read += batch.length;
    after = batch.at(-1)!.seq;
  }
  const digestMs = performance.now() - t0;
  sampleLog.close();
  console.log(
    `sample log: ${rate(nSamples, logMs)} appends/s (synchronous=FULL) vs ${rate(nSamples, jsonlMs)}/s fsync'd JSONL: ratio ${(jsonlMs / logMs).toFixed(2)}; digestsSince ${rate(read, digestMs)} digests/s`,
  );

  // 2. Framed JSON vs raw length-prefixed bytes over libp2p on loopback.
  const psk = newPsk();
  const mk = async () =>
    createHost({
      privateKey: await generateKeyPair('Ed25519'),
      psk,
      listen: ['/ip4/127.0.0.1/tcp/0'],
      mdns: false,
      topics: [],
    });
  const [a, b] = [await mk(), await mk()];
  try {
    const request = jobRequest(sampleTask('t'), 'S', [0], 8);
    const message = { type: 'sample' as const, jobId: request.jobId, ...resultFor(request, 0) };
    const bytes = new TextEncoder().encode(JSON.stringify(message));
    let rawDone!: () => void;
    await a.handle('/bench/raw/1', async ({ stream }) => {
      let n = 0;
      for await (const _ of decode(stream.source)) if (++n === nMessages) break;
      rawDone();
      await stream.close();
    });
    let framedDone!: () => void;
    await a.handle('/bench/framed/1', async ({ stream }) => {
      const wire = framed(stream, { schema: SampleResult, peer: 'b', protocol: '/bench/framed/1' });
      let n = 0;
      while ((await wire.read()) !== undefined) if (++n === nMessages) break;
      framedDone();
      await wire.close();
    });
    const addr = a.getMultiaddrs()[0]!;

    const raw = await b.dialProtocol(addr, '/bench/raw/1');
    const rawFinished = new Promise<void>((r) => {
      rawDone = r;
    });
    t0 = performance.now();
    const frame = encode.single(bytes).subarray(); // one chunk per message, as framed sends it
    void raw.sink(
      (function* () {
        for (let i = 0; i < nMessages; i++) yield frame;
      })(),
    );
    await rawFinished;
    const rawMs = performance.now() - t0;

    const stream = await b.dialProtocol(addr, '/bench/framed/1');
    const wire = framed(stream, { schema: SampleResult, peer: 'a', protocol: '/bench/framed/1' });
    const framedFinished = new Promise<void>((r) => {
      framedDone = r;
    });
    t0 = performance.now();
    for (let i = 0; i < nMessages; i++) await wire.send(message);
    await framedFinished;
    const framedMs = performance.now() - t0;
    await wire.close().catch(() => {});
    await raw.close().catch(() => {});
    console.log(
      `framed: ${rate(nMessages, framedMs)} msgs/s (${bytes.byteLength}-byte sample results, JSON + zod) vs ${rate(nMessages, rawMs)}/s raw length-prefixed: ratio ${(rawMs / framedMs).toFixed(2)}`,
    );
  } finally {
    await a.stop();
    await b.stop();
  }

  // 3. Campaign store: 500 tasks × k = 8.
  const store = openCampaignStore({ path: join(dir, 'campaigns.db') });
  const tasks = Array.from({ length: 500 }, (_, i) => ({
    id: `task-${i}`,
    promptFingerprint: fingerprint(`prompt ${i}`),
    split: 'train' as const,
  }));
  const seedBase = 1000;
  const { campaign } = store.start({
    spec: {
      name: 'bench',
      tasksHash: fingerprint('tasks'),
      models: ['qwen'],
      k: 8,
      sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase },
      split: 'all',
    },
    tasks,
    now: 0,
  });
  t0 = performance.now();
  for (const task of tasks) {
    const request = jobRequest(sampleTask(task.id), 'S', [0, 1, 2, 3, 4, 5, 6, 7]);
    campaign.placed(
      {
        jobId: request.jobId,
        taskId: task.id,
        model: 'qwen',
        peerId: 'P',
        samples: request.samples,
        attempt: 1,
      },
      1,
    );
    for (const i of request.samples) {
      const r = resultFor(request, i);
      if (r.seed !== sampleSeed(seedBase, i)) throw new Error('seed base mismatch');
      campaign.result(task.id, 'qwen', 'P', { type: 'sample', jobId: request.jobId, ...r }, 2);
    }
  }
  const storeMs = performance.now() - t0;
  t0 = performance.now();
  const summary = campaign.summary();
  const summaryMs = performance.now() - t0;
  store.close();
  console.log(
    `campaign store: ${rate(4000, storeMs)} results/s recorded (500 placements + 4000 results in ${storeMs.toFixed(0)} ms); summary of ${summary.samples.planned} slots in ${summaryMs.toFixed(1)} ms`,
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
