import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCollector } from '../../node/collector/collector.ts';
import { type DatasetStore, openDatasetStore } from '../../node/collector/store.ts';
import { newPsk } from '../../node/data-dir.ts';
import { digestOf } from '../../node/digests/codec.ts';
import { createDigestGossip } from '../../node/digests/gossip.ts';
import { createLogServer, createSampleServer, type Server } from '../../node/digests/servers.ts';
import type { Host } from '../../node/fleet/host.ts';
import { openSampleLog, type SampleLog } from '../../node/worker/sample-log.ts';
import type { Digest } from '../../protocol/digest.ts';
import { sampleBody } from '../helpers/samples.ts';
import { connect, FLEET, tempDir, testHost, until } from './helpers.ts';

interface Worker {
  host: Host;
  log: SampleLog;
  servers: Server[];
  append(n: number): Digest[];
}

let psk: string;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const hosts: Host[] = [];
const stores: DatasetStore[] = [];

async function host(): Promise<Host> {
  const h = await testHost(psk);
  hosts.push(h);
  return h;
}

async function worker(name: string): Promise<Worker> {
  const h = await host();
  const log = openSampleLog({ path: join(tmp.dir, `${name}.db`), origin: h.peerId.toString() });
  const servers = [
    await createSampleServer({ host: h, source: log }),
    await createLogServer({ host: h, source: log }),
  ];
  let i = 0;
  return {
    host: h,
    log,
    servers,
    append(n) {
      const out: Digest[] = [];
      for (let k = 0; k < n; k++, i++) {
        const body = sampleBody(`${name}-task-${i % 40}`, 'qwen', i, {
          reward: i % 3 === 0 ? 0 : 1,
          candidate: `export const f${i} = () => ${i};\n`,
        });
        out.push(digestOf(log.append(body)));
      }
      return out;
    },
  };
}

function store(name: string): DatasetStore {
  const s = openDatasetStore(join(tmp.dir, name));
  stores.push(s);
  return s;
}

beforeAll(async () => {
  psk = newPsk();
  tmp = await tempDir('vtnode-collector-test-');
});

afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
  for (const s of stores) s.close();
  await tmp.cleanup();
});

describe('collector', () => {
  it('catches up over /vtnode/log/1 (several pages), fetches every body, and converges with a second collector fed by gossip', async () => {
    const w = await worker('w1');
    w.append(1100);
    const c1Host = await host();
    await connect(c1Host, w.host);
    const s1 = store('c1');
    const c1 = createCollector({ host: c1Host, peers: () => [w.host.peerId.toString()], store: s1 });
    await c1.catchUp();
    await c1.idle();
    expect(s1.counts()).toMatchObject({ digests: 1100, bodies: 1100, pending: 0, rejected: 0 });
    expect(s1.highWater(w.host.peerId.toString())).toBe(1100);
    const sample = s1.samples({ origin: w.host.peerId.toString() })[5]!;
    expect(sample.body?.candidate).toBe('export const f5 = () => 5;\n');

    // Gossip: the worker publishes new digests as they become durable; c1 follows them.
    const gw = createDigestGossip({ host: w.host, fleetId: FLEET });
    const g1 = createDigestGossip({ host: c1Host, fleetId: FLEET, onDigest: (d) => c1.onDigest(d) });
    await until(() => w.host.services.pubsub.getSubscribers(`/vtnode/${FLEET}/digest/1`).length > 0, 'mesh');
    for (const d of w.append(10)) await gw.publish(d);
    await until(() => s1.counts().bodies === 1110, 'gossiped bodies at c1');
    await c1.idle();

    // c1 stops; the worker goes on (gossip nobody hears). c1 restarts on the same dataset and catches up.
    await c1.stop();
    g1.stop();
    for (const d of w.append(25)) await gw.publish(d);
    const c1b = createCollector({ host: c1Host, peers: () => [w.host.peerId.toString()], store: s1 });
    await c1b.catchUp();
    await c1b.idle();
    expect(s1.counts()).toMatchObject({ digests: 1135, bodies: 1135, pending: 0 });

    // A second collector that only ever catches up ends with identical contents.
    const c2Host = await host();
    await connect(c2Host, w.host);
    const s2 = store('c2');
    const c2 = createCollector({ host: c2Host, peers: () => [w.host.peerId.toString()], store: s2 });
    await c2.catchUp();
    await c2.idle();
    expect(s2.contentDigest()).toBe(s1.contentDigest());
    expect(s2.counts()).toEqual(s1.counts());
    await c1b.stop();
    await c2.stop();
    gw.stop();
  }, 60_000);

  it('fetches a body from another holder (a collector) when the origin is gone', async () => {
    const w = await worker('w2');
    const [d] = w.append(1);
    const holderHost = await host();
    await connect(holderHost, w.host);
    const holderStore = store('holder');
    const holder = createCollector({
      host: holderHost,
      peers: () => [w.host.peerId.toString()],
      store: holderStore,
    });
    await holder.catchUp();
    await createSampleServer({ host: holderHost, source: holderStore });
    await w.host.stop();

    const c3Host = await host();
    await connect(c3Host, holderHost);
    const s3 = store('c3');
    const c3 = createCollector({
      host: c3Host,
      peers: () => [w.host.peerId.toString(), holderHost.peerId.toString()],
      store: s3,
      fetchDelayMs: 1,
    });
    c3.onDigest(d!);
    await until(() => s3.counts().bodies === 1, 'the body from the holder');
    expect(s3.samples()[0]!.body?.candidate).toBe(w.log.get(d!.sampleId)!.body.candidate);
    await c3.stop();
    await holder.stop();
  }, 30_000);

  it('rejects a body whose hash does not match its digest and lowers the origin’s trust', async () => {
    const rogue = await host();
    const log = openSampleLog({ path: ':memory:', origin: rogue.peerId.toString() });
    const honest = log.append(sampleBody('t', 'qwen', 0, { candidate: 'honest\n' }));
    log.append(sampleBody('t', 'qwen', 1, { candidate: 'also honest\n' }));
    // Serves a different candidate than the one its digest (and log) hashed.
    await createSampleServer({
      host: rogue,
      source: {
        getMany: (ids) =>
          log
            .getMany(ids)
            .map((s) =>
              s.seq === honest.seq
                ? { ...s, body: { ...s.body, candidate: 'export const pwned = 1;\n' } }
                : s,
            ),
      },
    });
    await createLogServer({ host: rogue, source: log });
    const cHost = await host();
    await connect(cHost, rogue);
    const s = store('c-rogue');
    const c = createCollector({ host: cHost, peers: () => [rogue.peerId.toString()], store: s });
    await c.catchUp();
    await c.idle();
    expect(s.counts()).toMatchObject({ digests: 2, bodies: 1, rejected: 1, pending: 0 });
    const [t] = c.trust();
    expect(t).toMatchObject({ origin: rogue.peerId.toString(), rejectedBodies: 1, suspect: true });
    expect(t!.trust).toBeLessThan(1);
    await c.stop();
  }, 30_000);

  it('ignores digests of another origin served on /vtnode/log/1', async () => {
    const rogue = await host();
    const other = 'QmSomeOtherPeer';
    const log = openSampleLog({ path: ':memory:', origin: rogue.peerId.toString() });
    log.append(sampleBody('t', 'qwen', 0));
    await createLogServer({
      host: rogue,
      source: {
        digestsSince: (after, limit) => log.digestsSince(after, limit).map((d) => ({ ...d, origin: other })),
        counts: () => log.counts(),
      },
    });
    const cHost = await host();
    await connect(cHost, rogue);
    const s = store('c-forged-log');
    const c = createCollector({ host: cHost, peers: () => [rogue.peerId.toString()], store: s });
    await c.catchUp();
    expect(s.counts().digests).toBe(0);
    expect(c.trust().find((t) => t.origin === rogue.peerId.toString())).toMatchObject({ conflicts: 1 });
    await c.stop();
  }, 30_000);

  it('counts two different digests for one seq as a conflict and keeps the first', () => {
    const s = store('conflicts');
    const d = digestOf({ seq: 1, origin: 'peer-x', body: sampleBody('t', 'qwen', 0) });
    expect(s.addDigest(d)).toBe('new');
    expect(s.addDigest(d)).toBe('known');
    expect(s.addDigest({ ...d, reward: 0 })).toBe('conflict');
    expect(s.samples()[0]!.digest.reward).toBe(1);
    expect(s.origins()[0]).toMatchObject({ origin: 'peer-x', conflicts: 1, highWater: 1 });
    // Out-of-order arrival: the high-water mark only advances over contiguous seqs.
    const d3 = digestOf({ seq: 3, origin: 'peer-x', body: sampleBody('t', 'qwen', 2) });
    s.addDigest(d3);
    expect(s.highWater('peer-x')).toBe(1);
    s.addDigest(digestOf({ seq: 2, origin: 'peer-x', body: sampleBody('t', 'qwen', 1) }));
    expect(s.highWater('peer-x')).toBe(3);
  });
});
