import { generateKeyPair } from '@libp2p/crypto/keys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newPsk } from '../../node/data-dir.ts';
import { decodeDigest, encodeDigest } from '../../node/digests/codec.ts';
import { createDigestGossip, type DigestGossip } from '../../node/digests/gossip.ts';
import { type DigestSigner, digestSigner } from '../../node/digests/signature.ts';
import type { Host } from '../../node/fleet/host.ts';
import { MAX_DIGEST_BYTES, type SignedDigest } from '../../protocol/digest.ts';
import { ParseError } from '../../protocol/parse.ts';
import { digestTopic } from '../../protocol/topics.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';
import { connect, FLEET, testHost, until } from './helpers.ts';

const signers = new Map<string, DigestSigner>();

/** A digest of `origin` (a signer made here) for sample `seq`, signed, then changed by `overrides`. */
function digestFrom(origin: string, seq: number, overrides: Partial<SignedDigest> = {}): SignedDigest {
  return { ...signedDigest(signers.get(origin)!, seq, sampleBody('task-a', 'qwen', seq)), ...overrides };
}

describe('digest codec', () => {
  let p: string;
  beforeAll(async () => {
    const s = await testSigner();
    signers.set(s.origin, s);
    p = s.origin;
  });

  it('round-trips a signed digest and names the field of a forged origin', async () => {
    const d = digestFrom(p, 1);
    expect(decodeDigest(encodeDigest(d), p)).toEqual(d);
    const other = (await testSigner()).origin;
    expect(() => decodeDigest(encodeDigest(d), other)).toThrow(new RegExp(`origin: claims origin ${p}`));
  });

  it('rejects a digest whose own signature does not verify against its origin', () => {
    const d = digestFrom(p, 1);
    const enc = (x: SignedDigest) => encodeDigest(x);
    expect(() => decodeDigest(enc({ ...d, reward: 0 }), p)).toThrow(
      /sig: the signature of seq 1 does not verify/,
    );
    expect(() => decodeDigest(enc({ ...d, seq: 2 }), p)).toThrow(/sig:/);
    expect(() => decodeDigest(enc({ ...d, sig: digestFrom(p, 2).sig }), p)).toThrow(/sig:/);
    expect(() => decodeDigest(enc({ ...d, origin: 'peer-a' }), 'peer-a')).toThrow(
      /sig: origin peer-a is not a peer id/,
    );
    const bad = new TextEncoder().encode(JSON.stringify({ ...d, sig: 'not a signature' }));
    expect(() => decodeDigest(bad, p)).toThrow(/sig: expected an Ed25519 signature/);
    const { sig: _, ...unsigned } = d;
    expect(() => decodeDigest(new TextEncoder().encode(JSON.stringify(unsigned)), p)).toThrow(/sig/);
  });

  it('rejects malformed, non-JSON, oversized and out-of-range digests', () => {
    const bad = (x: unknown) => new TextEncoder().encode(JSON.stringify(x));
    expect(() => decodeDigest(bad({ ...digestFrom(p, 1), reward: 1.5 }), p)).toThrow(ParseError);
    expect(() => decodeDigest(bad({ ...digestFrom(p, 1), seq: 0 }), p)).toThrow(/seq/);
    expect(() => decodeDigest(bad({ ...digestFrom(p, 1), contentHash: 'abc' }), p)).toThrow(/contentHash/);
    expect(() => decodeDigest(new TextEncoder().encode('{not json'), p)).toThrow(ParseError);
    expect(() => decodeDigest(new Uint8Array(MAX_DIGEST_BYTES + 1), p)).toThrow(/exceeds the cap/);
    expect(() => encodeDigest({ ...digestFrom(p, 1), taskId: 'x'.repeat(201) })).toThrow(ParseError);
    // The largest digest the schema allows, signature included, fits under the cap.
    expect(() =>
      encodeDigest({
        ...digestFrom(p, 1),
        origin: 'o'.repeat(128),
        model: 'm'.repeat(256),
        taskId: 't'.repeat(200),
        seq: Number.MAX_SAFE_INTEGER,
        reward: 0.123456789012345,
      }),
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
  const atB: SignedDigest[] = [];
  const atC: SignedDigest[] = [];
  const rejectedAtB: string[] = [];

  beforeAll(async () => {
    const psk = newPsk();
    const keys = await Promise.all([0, 1, 2].map(() => generateKeyPair('Ed25519')));
    for (const k of keys) {
      const s = digestSigner(k);
      signers.set(s.origin, s);
    }
    [a, b, c] = (await Promise.all(keys.map((k) => testHost(psk, k)))) as [Host, Host, Host];
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
    // a gossips a digest of c's (validly signed by c), bypassing the publisher's own check: gossip
    // carries only the publisher's own digests (others' travel over /vtnode/log/2).
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

  it('rejects a digest whose own signature does not verify (a reward changed after signing)', async () => {
    const before = { b: atB.length, c: atC.length };
    const tampered = { ...digestFrom(a.peerId.toString(), 8), reward: 0.5 };
    await a.services.pubsub.publish(digestTopic(FLEET), encodeDigest(tampered));
    const marker = digestFrom(a.peerId.toString(), 9);
    await ga.publish(marker);
    await until(() => atC.some((d) => d.seq === 9), 'the marker at c');
    expect(rejectedAtB.some((m) => m.includes('does not verify'))).toBe(true);
    expect(atB.slice(before.b).map((d) => d.seq)).toEqual([9]);
    expect(atC.slice(before.c).map((d) => d.seq)).toEqual([9]);
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
