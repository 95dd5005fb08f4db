import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newPsk } from '../../node/data-dir.ts';
import { decodeDigest, digestOf, encodeDigest } from '../../node/digests/codec.ts';
import { createDigestGossip, type DigestGossip } from '../../node/digests/gossip.ts';
import type { Host } from '../../node/fleet/host.ts';
import type { Digest } from '../../protocol/digest.ts';
import { MAX_DIGEST_BYTES } from '../../protocol/digest.ts';
import { ParseError } from '../../protocol/parse.ts';
import { digestTopic } from '../../protocol/topics.ts';
import { sampleBody } from '../helpers/samples.ts';
import { connect, FLEET, testHost, until } from './helpers.ts';

function digestFrom(origin: string, seq: number, overrides: Partial<Digest> = {}): Digest {
  return { ...digestOf({ seq, origin, body: sampleBody('task-a', 'qwen', seq) }), ...overrides };
}

describe('digest codec', () => {
  it('round-trips a digest and names the field of a forged origin', () => {
    const d = digestFrom('peer-a', 1);
    expect(decodeDigest(encodeDigest(d), 'peer-a')).toEqual(d);
    expect(() => decodeDigest(encodeDigest(d), 'peer-b')).toThrow(/origin: claims origin peer-a/);
  });

  it('rejects malformed, non-JSON, oversized and out-of-range digests', () => {
    const bad = (x: unknown) => new TextEncoder().encode(JSON.stringify(x));
    expect(() => decodeDigest(bad({ ...digestFrom('p', 1), reward: 1.5 }), 'p')).toThrow(ParseError);
    expect(() => decodeDigest(bad({ ...digestFrom('p', 1), seq: 0 }), 'p')).toThrow(/seq/);
    expect(() => decodeDigest(bad({ ...digestFrom('p', 1), contentHash: 'abc' }), 'p')).toThrow(
      /contentHash/,
    );
    expect(() => decodeDigest(new TextEncoder().encode('{not json'), 'p')).toThrow(ParseError);
    expect(() => decodeDigest(new Uint8Array(MAX_DIGEST_BYTES + 1), 'p')).toThrow(/exceeds the cap/);
    expect(() => encodeDigest({ ...digestFrom('p', 1), taskId: 'x'.repeat(201) })).toThrow(ParseError);
    expect(() =>
      encodeDigest({ ...digestFrom('p', 1), origin: 'o'.repeat(128), model: 'm'.repeat(256) }),
    ).not.toThrow();
  });
});

describe('digest gossip over real libp2p hosts', () => {
  let a: Host;
  let b: Host;
  let c: Host;
  let ga: DigestGossip;
  let gb: DigestGossip;
  let gc: DigestGossip;
  const atB: Digest[] = [];
  const atC: Digest[] = [];
  const rejectedAtB: string[] = [];

  beforeAll(async () => {
    const psk = newPsk();
    [a, b, c] = await Promise.all([testHost(psk), testHost(psk), testHost(psk)]);
    ga = createDigestGossip({ host: a, fleetId: FLEET });
    gb = createDigestGossip({
      host: b,
      fleetId: FLEET,
      onDigest: (d) => atB.push(d),
      onReject: (err) => rejectedAtB.push(err.message),
    });
    gc = createDigestGossip({ host: c, fleetId: FLEET, onDigest: (d) => atC.push(d) });
    await connect(a, b);
    await connect(b, c);
    const topic = digestTopic(FLEET);
    // Forwarding (b → c) goes over the topic mesh, grafted at gossipsub heartbeats: wait for it.
    const mesh = (h: Host) =>
      (h.services.pubsub as unknown as { getMeshPeers(t: string): string[] }).getMeshPeers(topic);
    await until(() => mesh(a).length > 0 && mesh(b).length >= 2 && mesh(c).length > 0, 'the digest mesh');
  }, 30_000);

  afterAll(async () => {
    ga?.stop();
    gb?.stop();
    gc?.stop();
    await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
  });

  it('delivers a published digest through the mesh (a → b → c)', async () => {
    const d = digestFrom(a.peerId.toString(), 1);
    await ga.publish(d);
    await until(() => atB.length > 0 && atC.length > 0, 'delivery at b and c');
    expect(atB[0]).toEqual(d);
    expect(atC[0]).toEqual(d);
    expect(ga.counts().published).toBe(1);
  }, 20_000);

  it('refuses to publish a digest of another origin', async () => {
    await expect(ga.publish(digestFrom(c.peerId.toString(), 2))).rejects.toThrow(/cannot publish/);
  });

  it('rejects a digest whose origin is not its signer: not delivered, not forwarded', async () => {
    const before = { b: atB.length, c: atC.length };
    // a signs a digest claiming c's origin, bypassing the publisher's own check.
    const forged = digestFrom(c.peerId.toString(), 7);
    await a.services.pubsub.publish(digestTopic(FLEET), encodeDigest(forged));
    // A valid one afterwards, to know the forged one had its chance.
    const marker = digestFrom(a.peerId.toString(), 3);
    await ga.publish(marker);
    await until(() => atC.some((d) => d.seq === 3), 'the marker at c');
    expect(rejectedAtB.some((m) => m.includes('claims origin'))).toBe(true);
    expect(atB.slice(before.b).map((d) => d.seq)).toEqual([3]);
    expect(atC.slice(before.c).map((d) => d.seq)).toEqual([3]);
    expect(gb.counts().rejected).toBeGreaterThan(0);
  }, 20_000);

  it('rejects a malformed digest', async () => {
    const before = atB.length;
    await a.services.pubsub.publish(digestTopic(FLEET), new TextEncoder().encode('{"v":1,"seq":-1}'));
    const marker = digestFrom(a.peerId.toString(), 4);
    await ga.publish(marker);
    await until(() => atB.some((d) => d.seq === 4), 'the marker at b');
    expect(atB.slice(before).map((d) => d.seq)).toEqual([4]);
  }, 20_000);
});
