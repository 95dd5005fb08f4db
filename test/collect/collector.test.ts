import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCollector } from '../../node/collector/collector.ts';
import { type DatasetStore, openDatasetStore } from '../../node/collector/store.ts';
import { newPsk } from '../../node/data-dir.ts';
import { digestOf } from '../../node/digests/codec.ts';
import { createDigestGossip } from '../../node/digests/gossip.ts';
import {
  createLogServer,
  createSampleServer,
  type DigestSource,
  logBodies,
  type Server,
} from '../../node/digests/servers.ts';
import { type DigestSigner, digestSigner } from '../../node/digests/signature.ts';
import type { Host } from '../../node/fleet/host.ts';
import { openSampleLog, type SampleLog } from '../../node/worker/sample-log.ts';
import { claimFor, type SignedDigest } from '../../protocol/digest.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';
import { connect, FLEET, serveLog, tempDir, testHost, until } from './helpers.ts';

interface Worker {
  host: Host;
  log: SampleLog;
  signer: DigestSigner;
  servers: Server[];
  append(n: number): SignedDigest[];
}

let psk: string;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const hosts: Host[] = [];
const stores: DatasetStore[] = [];

async function host(privateKey?: PrivateKey): Promise<Host> {
  const h = await testHost(psk, privateKey);
  hosts.push(h);
  return h;
}

async function worker(name: string): Promise<Worker> {
  const key = await generateKeyPair('Ed25519');
  const h = await testHost(psk, key);
  hosts.push(h);
  const signer = digestSigner(key);
  const log = openSampleLog({ path: join(tmp.dir, `${name}.db`), origin: h.peerId.toString(), signer });
  const servers = await serveLog(h, log);
  let i = 0;
  return {
    host: h,
    log,
    signer,
    servers,
    append(n) {
      const out: SignedDigest[] = [];
      for (let k = 0; k < n; k++, i++) {
        // Workers named `<x>-redo` redo the samples of `<x>-dead` (same sample ids, their own candidates).
        const ns = name.replace(/-redo$/, '-dead');
        const body = sampleBody(`${ns}-task-${i % 40}`, 'qwen', i, {
          reward: i % 3 === 0 ? 0 : 1,
          candidate: `export const f${i} = () => ${i}; // ${name}\n`,
        });
        out.push(digestOf(log.append(body)));
      }
      return out;
    },
  };
}

/** A collector's node: a host serving its dataset as `vtnode collect` does (/vtnode/sample/2, /vtnode/log/2). */
async function collectorHost(s: DatasetStore, privateKey?: PrivateKey): Promise<Host> {
  const h = await host(privateKey);
  await createSampleServer({ host: h, source: s });
  await createLogServer({ host: h, source: s });
  return h;
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
  it('catches up over /vtnode/log/2 (several pages), fetches every body, and converges with a second collector fed by gossip', async () => {
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
    // The lag of each body from its scoring (helpers/samples.ts: scoredAt 1_790_000_000_000 + index).
    const { lagP50Ms, lagP99Ms } = c1.stats();
    const expected = Date.now() - 1_790_000_000_000;
    expect(Math.abs(lagP50Ms! - expected) / expected).toBeLessThan(0.02);
    expect(lagP99Ms!).toBeGreaterThanOrEqual(lagP50Ms!);
    const sample = s1.samples({ origin: w.host.peerId.toString() })[5]!;
    expect(sample.body?.candidate).toBe('export const f5 = () => 5; // w1\n');

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
    // An origin no longer in the fleet is asked last: the holder answers, the dead origin is never dialled.
    const c4Host = await host();
    await connect(c4Host, holderHost);
    const s4 = store('c4');
    const c4 = createCollector({
      host: c4Host,
      peers: () => [holderHost.peerId.toString()],
      store: s4,
      fetchDelayMs: 1,
    });
    c4.onDigest(d!);
    await until(() => s4.counts().bodies === 1, 'the body from the holder, first');
    expect(c4.stats().fetchErrors).toBe(0);
    await c4.stop();
    await holder.stop();
  }, 30_000);

  it('a dead origin’s body: an honest worker holding its own redone row of that sample id loses no trust', async () => {
    // w-dead logged sample S and died; w-redo redid S (same sample id, its own origin and seq).
    const dead = await worker('w-dead');
    const redo = await worker('w-redo');
    const [d] = dead.append(1);
    const [r] = redo.append(1);
    expect(r!.sampleId).toBe(d!.sampleId);
    expect(r!.origin).not.toBe(d!.origin);
    const holderHost = await host();
    await connect(holderHost, dead.host);
    const holderStore = store('holder-redo');
    const holder = createCollector({
      host: holderHost,
      peers: () => [dead.host.peerId.toString()],
      store: holderStore,
    });
    await holder.catchUp();
    await holder.idle();
    await createSampleServer({ host: holderHost, source: holderStore });
    await dead.host.stop();

    const cHost = await host();
    await connect(cHost, redo.host);
    await connect(cHost, holderHost);
    const s = store('c-redo');
    const c = createCollector({
      host: cHost,
      // The redoing worker is asked before the holder: it must answer nothing for the dead origin's row.
      peers: () => [dead.host.peerId.toString(), redo.host.peerId.toString(), holderHost.peerId.toString()],
      store: s,
      fetchDelayMs: 1,
    });
    c.onDigest(d!);
    await until(() => s.counts().bodies === 1, 'the dead origin’s body from the holder');
    await c.idle();
    expect(s.samples()[0]!.digest.origin).toBe(dead.host.peerId.toString());
    expect(s.samples()[0]!.body?.candidate).toBe(dead.log.get(d!.sampleId)!.body.candidate);
    for (const t of c.trust()) expect(t, t.origin).toMatchObject({ conflicts: 0, suspect: false });
    await c.stop();
    await holder.stop();
  }, 30_000);

  it('rejects a body whose hash does not match its digest and lowers the origin’s trust', async () => {
    const rogue = await worker('rogue-body');
    const [honest] = rogue.append(2);
    // Serves a different candidate than the one its digest (and log) hashed.
    await rogue.servers[0]!.stop();
    await createSampleServer({
      host: rogue.host,
      source: {
        getRows: (keys) =>
          logBodies(rogue.log)
            .getRows(keys)
            .map((r) =>
              r.seq === honest!.seq
                ? { ...r, body: { ...r.body, candidate: 'export const pwned = 1;\n' } }
                : r,
            ),
      },
    });
    const cHost = await host();
    await connect(cHost, rogue.host);
    const s = store('c-rogue');
    const c = createCollector({ host: cHost, peers: () => [rogue.host.peerId.toString()], store: s });
    await c.catchUp();
    await c.idle();
    expect(s.counts()).toMatchObject({ digests: 2, bodies: 1, rejected: 1, pending: 0 });
    const [t] = c.trust();
    expect(t).toMatchObject({ origin: rogue.host.peerId.toString(), rejectedBodies: 1, suspect: true });
    expect(t!.trust).toBeLessThan(1);
    await c.stop();
  }, 30_000);

  it('a holder that serves another body under a row’s (origin, seq) is a conflict against it; the body comes from an honest holder', async () => {
    const w = await worker('w-liar-holder');
    const [d] = w.append(1);
    // Other holders are asked in peer-id order: of two keys, the liar gets the one whose id sorts first.
    // (Drawing liars until one sorted below a given honest id failed when that id itself sorted low.)
    const [liarKey, honestKey] = (
      await Promise.all([generateKeyPair('Ed25519'), generateKeyPair('Ed25519')])
    ).sort((a, b) => (peerIdFromPrivateKey(a).toString() < peerIdFromPrivateKey(b).toString() ? -1 : 1));
    const honestStore = store('holder-honest');
    const honestHolder = await collectorHost(honestStore, honestKey);
    await connect(honestHolder, w.host);
    const h = createCollector({
      host: honestHolder,
      peers: () => [w.host.peerId.toString()],
      store: honestStore,
    });
    await h.catchUp();
    await h.idle();
    const liar = await host(liarKey);
    expect(liar.peerId.toString() < honestHolder.peerId.toString()).toBe(true);
    await createSampleServer({
      host: liar,
      source: {
        getRows: (keys) =>
          honestStore.getRows(keys).map((r) => ({
            ...r,
            body: { ...r.body, score: { ...r.body.score, reward: 1 - r.body.score.reward } },
          })),
      },
    });
    await w.host.stop();
    const cHost = await host();
    await connect(cHost, liar);
    await connect(cHost, honestHolder);
    const s = store('c-liar-holder');
    const c = createCollector({
      host: cHost,
      peers: () => [w.host.peerId.toString(), liar.peerId.toString(), honestHolder.peerId.toString()],
      store: s,
      fetchDelayMs: 1,
    });
    c.onDigest(d!);
    await until(() => s.counts().bodies === 1, 'the body from the honest holder');
    await c.idle();
    const trust = new Map(c.trust().map((t) => [t.origin, t]));
    expect(trust.get(liar.peerId.toString())).toMatchObject({ conflicts: 1, suspect: true });
    expect(trust.get(w.host.peerId.toString())).toMatchObject({
      conflicts: 0,
      rejectedBodies: 0,
      suspect: false,
    });
    expect(trust.get(honestHolder.peerId.toString())?.suspect ?? false).toBe(false);
    await c.stop();
    await h.stop();
  }, 30_000);

  it('a collector started after a worker died for good gets its digests (two pages) and bodies from another collector', async () => {
    const w = await worker('w-gone');
    w.append(600);
    const s1 = store('c-before');
    const c1Host = await collectorHost(s1);
    await connect(c1Host, w.host);
    const c1 = createCollector({ host: c1Host, peers: () => [w.host.peerId.toString()], store: s1 });
    await c1.catchUp();
    await c1.idle();
    expect(s1.counts()).toMatchObject({ digests: 600, bodies: 600 });
    await w.host.stop();

    const c2Host = await host();
    await connect(c2Host, c1Host);
    const s2 = store('c-after');
    const c2 = createCollector({
      host: c2Host,
      peers: () => [w.host.peerId.toString(), c1Host.peerId.toString()],
      store: s2,
    });
    await c2.catchUp();
    await c2.idle();
    expect(s2.counts()).toMatchObject({ digests: 600, bodies: 600, pending: 0, rejected: 0 });
    expect(s2.contentDigest()).toBe(s1.contentDigest());
    expect(c2.trust().map((t) => [t.origin, t.conflicts, t.suspect])).toEqual([
      [w.host.peerId.toString(), 0, false],
    ]);
    // Nothing new: the next catch-up pulls nothing again (the relayer's state was absorbed).
    await c2.catchUp();
    expect(s2.contentDigest()).toBe(s1.contentDigest());
    await c1.stop();
    await c2.stop();
  }, 60_000);

  it('a node relaying digests it altered, of another origin than asked, or unsigned, is a conflict against it, never against the origin', async () => {
    const w = await worker('w-relayed');
    const real = w.append(3);
    const other = await testSigner();
    const otherDigests = [1, 2].map((seq) => signedDigest(other, seq, sampleBody('x', 'qwen', seq)));
    const forgeries: [string, (d: SignedDigest[]) => SignedDigest[]][] = [
      ['altered reward', (ds) => ds.map((d) => ({ ...d, reward: d.reward === 1 ? 0 : 1 }))],
      ['another origin', () => otherDigests],
      [
        'signature of another digest',
        (ds) => ds.map((d, i) => ({ ...d, sig: ds[(i + 1) % ds.length]!.sig })),
      ],
      [
        'the other origin’s key',
        (ds) => ds.map((d) => ({ ...d, sig: other.sign({ ...d, origin: other.origin }).sig })),
      ],
    ];
    for (const [what, forge] of forgeries) {
      const rogue = await host();
      const source: DigestSource = {
        originSummaries: () => [{ origin: w.host.peerId.toString(), highWater: 3, maxSeq: 3, count: 3 }],
        digestsOf: () => ({ digests: forge(real), highWater: 3 }),
      };
      await createLogServer({ host: rogue, source });
      const cHost = await host();
      await connect(cHost, rogue);
      const s = store(`c-forged-${what.replace(/\W+/g, '-')}`);
      const c = createCollector({ host: cHost, peers: () => [rogue.peerId.toString()], store: s });
      await c.catchUp();
      expect(s.counts().digests, what).toBe(0);
      const trust = new Map(c.trust().map((t) => [t.origin, t]));
      expect(trust.get(rogue.peerId.toString()), what).toMatchObject({ conflicts: 1, suspect: true });
      expect(trust.get(w.host.peerId.toString())?.conflicts ?? 0, what).toBe(0);
      expect(trust.get(other.origin)?.conflicts ?? 0, what).toBe(0);
      await c.stop();
    }
  }, 60_000);

  it('replayed digests (old signed rows served again whatever is asked, and gossiped again) change nothing and count against nobody', async () => {
    const w = await worker('w-replayed');
    const real = w.append(3);
    const rogue = await host();
    const source: DigestSource = {
      originSummaries: () => [{ origin: w.host.peerId.toString(), highWater: 3, maxSeq: 3, count: 3 }],
      // Whatever seq is asked after, the same three rows again.
      digestsOf: () => ({ digests: real, highWater: 3 }),
    };
    await createLogServer({ host: rogue, source });
    const cHost = await host();
    await connect(cHost, rogue);
    const s = store('c-replayed');
    const c = createCollector({ host: cHost, peers: () => [rogue.peerId.toString()], store: s });
    await c.catchUp();
    await c.catchUp();
    for (let i = 0; i < 5; i++) for (const d of real) c.onDigest(d);
    await c.idle();
    expect(s.counts().digests).toBe(3);
    expect(s.highWater(w.host.peerId.toString())).toBe(3);
    for (const t of c.trust()) expect(t.conflicts, t.origin).toBe(0);
    await c.stop();
  }, 30_000);

  it('an origin that signed two different digests for one seq is a conflict against it, whoever relayed either', async () => {
    const w = await worker('w-equivocates');
    const [d1] = w.append(1);
    // Another claim for seq 1, signed by the origin's own key.
    const twin = w.signer.sign(claimFor(sampleBody('elsewhere', 'qwen', 0), w.host.peerId.toString(), 1));
    const relayStore = store('relay-twin');
    expect(relayStore.addDigest(twin)).toBe('new');
    const relay = await collectorHost(relayStore);
    const cHost = await host();
    await connect(cHost, relay);
    const s = store('c-twin');
    const c = createCollector({
      host: cHost,
      peers: () => [relay.peerId.toString()],
      store: s,
      fetchDelayMs: 1,
    });
    await c.catchUp();
    expect(s.counts().digests).toBe(1);
    c.onDigest(d1!);
    await until(
      () => c.trust().find((t) => t.origin === w.host.peerId.toString())?.conflicts === 1,
      'the conflict',
    );
    await c.idle();
    expect(c.trust().find((t) => t.origin === relay.peerId.toString())?.conflicts ?? 0).toBe(0);
    await c.stop();
  }, 30_000);

  it('counts two different digests for one seq as a conflict and keeps the first', async () => {
    const s = store('conflicts');
    const x = await testSigner();
    const d = signedDigest(x, 1, sampleBody('t', 'qwen', 0));
    expect(s.addDigest(d)).toBe('new');
    expect(s.addDigest(d)).toBe('known');
    expect(s.addDigest(signedDigest(x, 1, sampleBody('t', 'qwen', 0, { reward: 0 })))).toBe('conflict');
    expect(s.samples()[0]!.digest.reward).toBe(1);
    expect(s.origins()[0]).toMatchObject({ origin: x.origin, conflicts: 1, highWater: 1 });
    // Out-of-order arrival: the high-water mark only advances over contiguous seqs.
    s.addDigest(signedDigest(x, 3, sampleBody('t', 'qwen', 2)));
    expect(s.highWater(x.origin)).toBe(1);
    expect(s.originSummaries(undefined, 10)).toEqual([
      { origin: x.origin, highWater: 1, maxSeq: 3, count: 2 },
    ]);
    s.addDigest(signedDigest(x, 2, sampleBody('t', 'qwen', 1)));
    expect(s.highWater(x.origin)).toBe(3);
    expect(s.digestsOf(x.origin, 1, 10).digests.map((r) => [r.seq, r.sig])).toEqual(
      [2, 3].map((seq) => [seq, s.samples().find((r) => r.digest.seq === seq)!.digest.sig]),
    );
    expect(s.digestsOf('someone-else', 0, 10)).toEqual({ digests: [], highWater: 0 });
  });
});
