import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openDatasetStore } from '../../node/collector/store.ts';
import { newPsk } from '../../node/data-dir.ts';
import {
  combineSources,
  createLogServer,
  fetchBodies,
  fetchDigests,
  fetchOrigins,
  logBodies,
  logDigests,
} from '../../node/digests/servers.ts';
import { signatureError } from '../../node/digests/signature.ts';
import type { Host } from '../../node/fleet/host.ts';
import { dialFramed } from '../../node/wire/streams.ts';
import type { SampleLog } from '../../node/worker/sample-log.ts';
import { MAX_ORIGINS_PER_FRAME, MAX_SAMPLES_PER_REQUEST } from '../../protocol/fetch.ts';
import { LOG_PROTOCOL, SAMPLE_PROTOCOL } from '../../protocol/topics.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';
import { connect, serveLog, tempDir, testHost, testWorker } from './helpers.ts';

let server: Host;
let client: Host;
let log: SampleLog;
let origin: string;
const psk = newPsk();

beforeAll(async () => {
  ({ host: server, log } = await testWorker(psk));
  client = await testHost(psk);
  origin = server.peerId.toString();
  for (let i = 0; i < 150; i++) log.append(sampleBody(`t${i % 7}`, 'qwen', i));
  await serveLog(server, log);
  await connect(client, server);
}, 30_000);

afterAll(async () => {
  await Promise.all([client?.stop(), server?.stop()]);
  log?.close();
});

describe('/vtnode/sample/2 and /vtnode/log/2 of a worker', () => {
  it('serves exact (origin, seq) rows in the order asked, skipping rows it does not hold, split into bounded requests', async () => {
    const other = await testSigner();
    const wanted = [
      { origin, seq: 150 },
      { origin, seq: 151 },
      { origin: other.origin, seq: 1 },
      ...Array.from({ length: 100 }, (_, i) => ({ origin, seq: i + 1 })),
    ];
    const got = await fetchBodies(client, server.peerId, wanted);
    expect(got.map((r) => r.seq)).toEqual([150, ...Array.from({ length: 100 }, (_, i) => i + 1)]);
    expect(got[0]).toMatchObject({ origin, body: log.bySeq([150])[0]!.body });
  });

  it('resets a request over the cap, repeated or malformed, and stays up for the next one', async () => {
    const tooMany = Array.from({ length: MAX_SAMPLES_PER_REQUEST + 1 }, (_, i) => ({ origin, seq: i + 1 }));
    for (const request of [
      { v: 2, samples: tooMany },
      {
        v: 2,
        samples: [
          { origin, seq: 1 },
          { origin, seq: 1 },
        ],
      },
      { v: 2, samples: [{ origin, seq: 0 }] },
      { v: 1, sampleIds: [`sha256:${'0'.repeat(64)}`] },
      { v: 2 },
    ]) {
      const wire = await dialFramed(client, server.peerId, SAMPLE_PROTOCOL, { schema: z.unknown() });
      await wire.send(request);
      await wire.closeWrite().catch(() => {});
      await expect(wire.read()).rejects.toThrow();
    }
    expect(await fetchBodies(client, server.peerId, [{ origin, seq: 1 }])).toHaveLength(1);
  });

  it('lists its own origin, and pages its signed digests after a seq with its high-water mark', async () => {
    expect(await fetchOrigins(client, server.peerId)).toEqual([
      { origin, highWater: 150, maxSeq: 150, count: 150 },
    ]);
    const page = await fetchDigests(client, server.peerId, origin, 140, 5);
    expect(page.highWater).toBe(150);
    expect(page.digests.map((d) => d.seq)).toEqual([141, 142, 143, 144, 145]);
    for (const d of page.digests) expect(signatureError(d)).toBeNull();
    expect((await fetchDigests(client, server.peerId, origin, 150)).digests).toEqual([]);
    // A worker holds only its own digests.
    const other = await testSigner();
    expect(await fetchDigests(client, server.peerId, other.origin, 0)).toMatchObject({
      digests: [],
      highWater: 0,
    });
  });

  it('resets a malformed log request and stays up', async () => {
    for (const request of [
      { v: 1, after: 0, limit: 10 },
      { v: 2, kind: 'digests', origin, after: -1, limit: 10 },
      { v: 2, kind: 'digests', origin, after: 0, limit: 501 },
      { v: 2, kind: 'everything' },
    ]) {
      const wire = await dialFramed(client, server.peerId, LOG_PROTOCOL, { schema: z.unknown() });
      await wire.send(request);
      await wire.closeWrite().catch(() => {});
      await expect(wire.read()).rejects.toThrow();
    }
    expect((await fetchDigests(client, server.peerId, origin, 0, 1)).digests).toHaveLength(1);
  });

  it('combines sources: the first that holds a row wins, order kept', async () => {
    const { host: otherHost, log: otherLog } = await testWorker(psk);
    const extra = otherLog.append(sampleBody('x', 'qwen', 999));
    const both = combineSources(logBodies(log), logBodies(otherLog));
    const keys = [
      { origin: otherLog.origin, seq: extra.seq },
      { origin, seq: 3 },
      { origin, seq: 999 },
    ];
    expect(both.getRows(keys).map((r) => [r.origin, r.seq])).toEqual([
      [otherLog.origin, 1],
      [origin, 3],
    ]);
    expect(logDigests(otherLog).originSummaries(otherLog.origin, 10)).toEqual([]);
    otherLog.close();
    await otherHost.stop();
  });
});

describe('/vtnode/log/2 of a collector: any origin it holds, pages of origins', () => {
  it('relays every origin’s signed digests as they were signed, and pages its origin list', async () => {
    const tmp = await tempDir('vtnode-servers-test-');
    const store = openDatasetStore(tmp.dir);
    const signers = await Promise.all(Array.from({ length: 3 }, () => testSigner()));
    for (const s of signers)
      store.addDigests([1, 2, 3].map((seq) => signedDigest(s, seq, sampleBody(`t-${s.origin}`, 'q', seq))));
    // Many origins of one digest each: more than one page of origins.
    const many = await Promise.all(Array.from({ length: MAX_ORIGINS_PER_FRAME + 5 }, () => testSigner()));
    store.addDigests(many.map((s) => signedDigest(s, 1, sampleBody('m', 'q', 0))));
    const relay = await testHost(psk);
    await createLogServer({ host: relay, source: store });
    await connect(client, relay);
    const index = await fetchOrigins(client, relay.peerId);
    expect(index.map((o) => o.origin)).toEqual([...signers, ...many].map((s) => s.origin).sort());
    expect(index.find((o) => o.origin === signers[0]!.origin)).toEqual({
      origin: signers[0]!.origin,
      highWater: 3,
      maxSeq: 3,
      count: 3,
    });
    const page = await fetchDigests(client, relay.peerId, signers[1]!.origin, 1);
    expect(page.digests.map((d) => [d.origin, d.seq])).toEqual([
      [signers[1]!.origin, 2],
      [signers[1]!.origin, 3],
    ]);
    for (const d of page.digests) expect(signatureError(d)).toBeNull();
    store.close();
    await relay.stop();
    await tmp.cleanup();
  }, 60_000);
});

describe('fetches from a peer that accepts a stream and never answers', () => {
  let mute: Host;
  beforeAll(async () => {
    mute = await testHost(psk);
    // Takes each stream and holds it: no reply, no close.
    const held: unknown[] = [];
    for (const protocol of [SAMPLE_PROTOCOL, LOG_PROTOCOL])
      await mute.handle(protocol, ({ stream }) => {
        held.push(stream);
      });
    await connect(client, mute);
  }, 30_000);
  afterAll(() => mute?.stop());

  it('fail after their time limit instead of waiting forever (bodies, origins, digests)', async () => {
    const started = Date.now();
    const limit = { timeoutMs: 400 };
    await expect(fetchBodies(client, mute.peerId, [{ origin, seq: 1 }], limit)).rejects.toThrow(
      /abort|timeout/i,
    );
    await expect(fetchOrigins(client, mute.peerId, limit)).rejects.toThrow(/abort|timeout/i);
    await expect(fetchDigests(client, mute.peerId, origin, 0, 10, limit)).rejects.toThrow(/abort|timeout/i);
    // Bounded by the limits, not by the test's own timeout (generous: a loaded machine).
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("still ends at once on the caller's signal", async () => {
    const ctl = new AbortController();
    const fetching = fetchBodies(client, mute.peerId, [{ origin, seq: 1 }], { signal: ctl.signal });
    setTimeout(() => ctl.abort(new Error('stopping')), 100);
    await expect(fetching).rejects.toThrow(/stopping|abort/i);
  });
});
