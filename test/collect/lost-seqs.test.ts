// A worker whose sample log lost rows (an older copy restored) serves the lost seqs as `lost` ranges
// on /vtnode/log/2; collectors count them as held, so catch-up moves past them, and nothing the
// worker logs afterwards clashes with what they hold (issue 11, defect 5). Real libp2p over TCP.
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCollector } from '../../node/collector/collector.ts';
import { type DatasetStore, openDatasetStore } from '../../node/collector/store.ts';
import { newPsk } from '../../node/data-dir.ts';
import {
  createLogServer,
  createSampleServer,
  fetchDigests,
  logBodies,
  logDigests,
} from '../../node/digests/servers.ts';
import { type DigestSigner, digestSigner } from '../../node/digests/signature.ts';
import type { Host } from '../../node/fleet/host.ts';
import { openSampleLog, type SampleLog } from '../../node/worker/sample-log.ts';
import { DigestsReply, MAX_LOST_RANGES_PER_REPLY } from '../../protocol/fetch.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';
import { connect, tempDir, testHost } from './helpers.ts';

let tmp: Awaited<ReturnType<typeof tempDir>>;
const hosts: Host[] = [];
const stores: DatasetStore[] = [];
const logs: SampleLog[] = [];
let psk: string;

beforeAll(async () => {
  psk = newPsk();
  tmp = await tempDir('vt-lost-');
  [w, x] = await Promise.all([testSigner(), testSigner()]);
});
afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
  for (const s of stores) s.close();
  for (const l of logs) l.close();
  await tmp.cleanup();
});

const body = (i: number) =>
  sampleBody(`task-${i % 5}`, 'qwen', i, { candidate: `export const f = () => ${i};\n` });
let w: DigestSigner;
let x: DigestSigner;
const digestsOf = (signer: DigestSigner, from: number, to: number) => {
  const out = [];
  for (let seq = from; seq <= to; seq++) out.push(signedDigest(signer, seq, body(seq)));
  return out;
};

describe('DigestsReply lost ranges', () => {
  it('are optional, ordered first <= last, within highWater, bounded in number', () => {
    const ok = (v: object) => DigestsReply.safeParse({ kind: 'digests', digests: [], ...v }).success;
    expect(ok({ highWater: 5 })).toBe(true);
    expect(ok({ highWater: 5, lost: [{ first: 2, last: 5 }] })).toBe(true);
    expect(ok({ highWater: 5, lost: [{ first: 3, last: 2 }] })).toBe(false);
    expect(ok({ highWater: 5, lost: [{ first: 0, last: 2 }] })).toBe(false);
    expect(ok({ highWater: 5, lost: [{ first: 2, last: 6 }] })).toBe(false);
    expect(ok({ highWater: 5, lost: [{ first: 2.5, last: 3 }] })).toBe(false);
    expect(ok({ highWater: 5, lost: [{ first: '2', last: 3 }] })).toBe(false);
    expect(ok({ highWater: 5, lost: 'none' })).toBe(false);
    const many = Array.from({ length: MAX_LOST_RANGES_PER_REPLY + 1 }, (_, i) => ({
      first: i + 1,
      last: i + 1,
    }));
    expect(ok({ highWater: 1000, lost: many })).toBe(false);
    expect(ok({ highWater: 1000, lost: many.slice(1) })).toBe(true);
  });
});

describe('dataset store: lost ranges', () => {
  it('move the high-water mark past them, wherever they fall', () => {
    const s = openDatasetStore(join(tmp.dir, 'hw'));
    stores.push(s);
    const W = w.origin;
    const X = x.origin;
    s.addDigests(digestsOf(w, 1, 4));
    s.addDigests(digestsOf(w, 9, 10));
    expect(s.highWater(W)).toBe(4);
    s.addLost(W, [{ first: 5, last: 8 }]);
    expect(s.highWater(W)).toBe(10);
    expect(s.isLost(W, 6)).toBe(true);
    expect(s.isLost(W, 9)).toBe(false);
    expect(s.isLost('other', 6)).toBe(false);
    // A range declared before the digests arrive, and a range at the very start.
    s.addLost(X, [{ first: 1, last: 3 }]);
    expect(s.highWater(X)).toBe(3);
    s.addDigests(digestsOf(x, 4, 5));
    expect(s.highWater(X)).toBe(5);
    s.addLost(X, [
      { first: 7, last: 7 },
      { first: 6, last: 6 },
    ]);
    expect(s.highWater(X)).toBe(7);
    // A digest for a seq declared lost, relayed later by someone who held it, is still taken.
    expect(s.addDigest(digestsOf(w, 6, 6)[0]!)).toBe('new');
    // Declaring the same range again changes nothing.
    s.addLost(W, [{ first: 5, last: 8 }]);
    expect(s.highWater(W)).toBe(10);
  });

  it('a sample logged again under a new seq after its seq was lost is new, not a contradiction', () => {
    const s = openDatasetStore(join(tmp.dir, 'again'));
    stores.push(s);
    const W = w.origin;
    s.addDigests(digestsOf(w, 1, 3));
    // Sample 2 logged again under seq 4 (signed as such by its origin).
    const again = signedDigest(w, 4, body(2));
    // Not declared lost: one sample under two seqs is the origin contradicting itself.
    expect(s.addDigest(again)).toBe('conflict');
    expect(s.origin(W)!.conflicts).toBe(1);
    s.addLost(W, [{ first: 2, last: 2 }]);
    expect(s.addDigest(again)).toBe('new');
    expect(s.origin(W)!.conflicts).toBe(1);
    expect(s.highWater(W)).toBe(4);
    // The latest seq is the one the origin serves now.
    expect(s.digest(W, again.sampleId)?.seq).toBe(4);
    // But the same sample a third time, under yet another seq, is a contradiction again.
    expect(s.addDigest(signedDigest(w, 5, body(2)))).toBe('conflict');
  });
});

describe('a worker restored from an older copy, and two collectors', () => {
  it('seqs never clash, catch-up moves past the lost range, no conflict is counted against the worker', async () => {
    const path = join(tmp.dir, 'worker.db');
    const key = await generateKeyPair('Ed25519');
    const signer = digestSigner(key);
    const [wHost, c1Host, c2Host] = await Promise.all([testHost(psk, key), testHost(psk), testHost(psk)]);
    hosts.push(wHost, c1Host, c2Host);
    const origin = wHost.peerId.toString();
    let log = openSampleLog({ path, origin, signer });
    const appended = (i: number) => log.append(body(i));
    for (let i = 0; i < 6; i++) appended(i);
    log.close();
    await copyFile(path, join(tmp.dir, 'backup.db'));
    log = openSampleLog({ path, origin, signer });
    for (let i = 6; i < 10; i++) appended(i);
    // The live log is served through a stable view: the test swaps the file under it.
    const live = {
      origin,
      bySeq: (seqs: readonly number[]) => log.bySeq(seqs),
      digestsSince: (a: number, l: number) => log.digestsSince(a, l),
      counts: () => log.counts(),
      lostSince: (a: number, l: number) => log.lostSince(a, l),
    };
    await createSampleServer({ host: wHost, source: logBodies(live) });
    await createLogServer({ host: wHost, source: logDigests(live) });
    await connect(c1Host, wHost);
    await connect(c2Host, wHost);

    const c1Store = openDatasetStore(join(tmp.dir, 'c1'));
    stores.push(c1Store);
    const c1 = createCollector({ host: c1Host, peers: () => [origin], store: c1Store, catchUpIntervalMs: 0 });
    await c1.catchUp();
    expect(c1Store.highWater(origin)).toBe(10);
    expect(c1Store.counts()).toMatchObject({ digests: 10, bodies: 10, pending: 0 });

    // The worker's disk is restored from the older copy: rows 7..10 are gone.
    log.close();
    await copyFile(join(tmp.dir, 'backup.db'), path);
    log = openSampleLog({ path, origin, signer });
    logs.push(log);
    expect(log.lostSince(0, 64)).toEqual([{ first: 7, last: 10 }]);
    // New samples, and a lost one (index 8) logged again when its job is placed again.
    const later = [appended(10), appended(11), appended(8)];
    expect(later.map((r) => r.seq)).toEqual([11, 12, 13]);

    const page = await fetchDigests(c1Host, origin, origin, 6);
    expect(page.lost).toEqual([{ first: 7, last: 10 }]);
    expect(page.highWater).toBe(13);

    await c1.catchUp();
    expect(c1Store.highWater(origin)).toBe(13);
    expect(c1Store.counts()).toMatchObject({ digests: 13, bodies: 13, pending: 0, rejected: 0 });
    expect(c1Store.origin(origin)).toMatchObject({ conflicts: 0, rejectedBodies: 0 });

    // A collector that starts now gets everything the worker still holds, and skips what it lost.
    const c2Store = openDatasetStore(join(tmp.dir, 'c2'));
    stores.push(c2Store);
    const c2 = createCollector({ host: c2Host, peers: () => [origin], store: c2Store, catchUpIntervalMs: 0 });
    await c2.catchUp();
    expect(c2Store.highWater(origin)).toBe(13);
    expect(c2Store.counts()).toMatchObject({ digests: 9, bodies: 9, pending: 0, rejected: 0 });
    expect(c2Store.origin(origin)).toMatchObject({ conflicts: 0, rejectedBodies: 0 });
    // A catch-up from the high-water mark finds nothing more to ask.
    expect((await fetchDigests(c2Host, origin, origin, c2Store.highWater(origin))).digests).toEqual([]);
    await Promise.all([c1.stop(), c2.stop()]);
  }, 60_000);
});
