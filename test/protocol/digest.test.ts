import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { describe, expect, it } from 'vitest';
import { checkRelayed, digestSigner, signatureError } from '../../node/digests/signature.ts';
import { canonicalJson } from '../../protocol/canonical.ts';
import {
  claimFor,
  claimOf,
  DIGEST_SIGNING_DOMAIN,
  type Digest,
  digestSigningBytes,
  SignedDigest,
} from '../../protocol/digest.ts';
import { DigestsRequest, LogReply, LogRequest, SampleRequest } from '../../protocol/fetch.ts';
import { parseWith } from '../../protocol/parse.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody } from '../helpers/samples.ts';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe('digest signing bytes', () => {
  const claim = claimFor(sampleBody('t', 'qwen', 3), '12D3KooWorigin', 7);

  it('are the domain prefix and the canonical JSON of exactly the claim fields', () => {
    expect(text(digestSigningBytes(claim))).toBe(DIGEST_SIGNING_DOMAIN + canonicalJson(claim));
    expect(DIGEST_SIGNING_DOMAIN).toBe('vtnode/digest/1\n');
  });

  it('ignore key order, the signature and any extra member', () => {
    const reversed = Object.fromEntries(Object.entries(claim).reverse()) as Digest;
    expect(digestSigningBytes(reversed)).toEqual(digestSigningBytes(claim));
    const extra = { ...claim, sig: 'x', note: 'smuggled' } as Digest;
    expect(digestSigningBytes(extra)).toEqual(digestSigningBytes(claim));
    expect(claimOf(extra)).toEqual(claim);
  });

  it('change with every claim field', () => {
    const base = text(digestSigningBytes(claim));
    const changes: Partial<Digest>[] = [
      { sampleId: `sha256:${'1'.repeat(64)}` },
      { taskId: 'u' },
      { model: 'llama' },
      { split: 'eval' },
      { reward: 0.5 },
      { contentHash: `sha256:${'2'.repeat(64)}` },
      { evalFingerprint: `sha256:${'3'.repeat(64)}` },
      { origin: '12D3KooWother' },
      { seq: 8 },
    ];
    for (const change of changes) expect(text(digestSigningBytes({ ...claim, ...change }))).not.toBe(base);
  });
});

describe('signed digests', () => {
  it('verify against the origin’s key embedded in its peer id, and nothing else', async () => {
    const signer = await testSigner();
    const other = await testSigner();
    const d = signedDigest(signer, 1, sampleBody('t', 'qwen', 0));
    expect(SignedDigest.parse(d)).toEqual(d);
    expect(signatureError(d)).toBeNull();
    expect(signatureError({ ...d, reward: 0 })).toMatch(/does not verify against/);
    expect(signatureError({ ...d, origin: other.origin })).toMatch(/does not verify/);
    expect(signatureError({ ...d, sig: signedDigest(signer, 2, sampleBody('t', 'qwen', 1)).sig })).toMatch(
      /does not verify/,
    );
    expect(signatureError({ ...d, origin: 'not-a-peer-id' })).toMatch(/is not a peer id/);
    const secp = peerIdFromPrivateKey(await generateKeyPair('secp256k1')).toString();
    expect(signatureError({ ...d, origin: secp })).toMatch(/is a secp256k1 peer id, not Ed25519/);
  });

  it('the signer refuses another origin’s claim and a key that is not Ed25519', async () => {
    const signer = await testSigner();
    const claim = claimFor(sampleBody('t', 'qwen', 0), (await testSigner()).origin, 1);
    expect(() => signer.sign(claim)).toThrow(/cannot sign a digest of origin/);
    expect(() => digestSigner(Object.assign(Object.create(null), { type: 'RSA' }))).toThrow(/Ed25519/);
    // Ed25519 is deterministic: the same claim signs the same.
    const own = claimFor(sampleBody('t', 'qwen', 0), signer.origin, 1);
    expect(signer.sign(own)).toEqual(signer.sign({ ...own }));
  });

  it('the schema takes only a 64-byte base64url signature', async () => {
    const d = signedDigest(await testSigner(), 1, sampleBody('t', 'qwen', 0));
    const bad = (sig: unknown) => () => parseWith(SignedDigest, { ...d, sig }, 'digest from p');
    expect(bad(`${d.sig}A`)).toThrow(/sig: expected an Ed25519 signature/);
    expect(bad(d.sig.slice(1))).toThrow(/sig/);
    expect(bad(`${d.sig.slice(0, 85)}B`)).toThrow(/sig/); // the last character carries 2 bits only
    expect(bad(`${d.sig.slice(0, 85)}=`)).toThrow(/sig/);
    expect(bad(42)).toThrow(/sig/);
    expect(bad(undefined)).toThrow(/sig/);
  });

  it('a relayed page is split into valid digests and forged ones, each forgery with its reason', async () => {
    const o = await testSigner();
    const x = await testSigner();
    const good = [1, 2].map((seq) => signedDigest(o, seq, sampleBody('t', 'qwen', seq)));
    const foreign = signedDigest(x, 3, sampleBody('t', 'qwen', 3));
    const altered = { ...good[1]!, reward: 0.25 };
    const { valid, forged } = checkRelayed(o.origin, [good[0]!, foreign, altered, good[1]!]);
    expect(valid).toEqual(good);
    expect(forged.map((f) => f.why)).toEqual([
      `a digest of ${x.origin} served for ${o.origin}`,
      expect.stringMatching(/does not verify/),
    ]);
  });
});

describe('/vtnode/sample/2 and /vtnode/log/2 schemas', () => {
  it('a sample request names exact rows: bounded, no repeats, positive seqs', () => {
    const key = { origin: '12D3KooWorigin', seq: 1 };
    expect(SampleRequest.parse({ v: 2, samples: [key] })).toEqual({ v: 2, samples: [key] });
    const bad = (x: unknown) => () => parseWith(SampleRequest, x, 'a sample request from p');
    expect(bad({ v: 2, samples: [key, { ...key }] })).toThrow(/samples: samples repeat/);
    expect(bad({ v: 2, samples: [] })).toThrow(/samples/);
    expect(bad({ v: 2, samples: Array.from({ length: 65 }, (_, i) => ({ ...key, seq: i + 1 })) })).toThrow(
      /samples/,
    );
    expect(bad({ v: 2, samples: [{ ...key, seq: 0 }] })).toThrow(/samples\.0\.seq/);
    expect(bad({ v: 2, samples: [{ ...key, origin: '' }] })).toThrow(/samples\.0\.origin/);
    expect(bad({ v: 1, sampleIds: [] })).toThrow(/v/);
  });

  it('a log request is an origins page or one origin’s digests; anything else is refused with the field named', () => {
    expect(LogRequest.parse({ v: 2, kind: 'origins' })).toEqual({ v: 2, kind: 'origins' });
    expect(LogRequest.parse({ v: 2, kind: 'origins', after: 'x' })).toMatchObject({ after: 'x' });
    const ok = { v: 2, kind: 'digests', origin: 'o', after: 0, limit: 500 };
    expect(DigestsRequest.parse(ok)).toEqual(ok);
    const bad = (x: unknown) => () => parseWith(LogRequest, x, 'a log request from p');
    expect(bad({ ...ok, limit: 501 })).toThrow(/limit/);
    expect(bad({ ...ok, after: -1 })).toThrow(/after/);
    expect(bad({ ...ok, after: 1.5 })).toThrow(/after/);
    expect(bad({ ...ok, origin: 'o'.repeat(129) })).toThrow(/origin/);
    expect(bad({ v: 2, kind: 'all' })).toThrow(/kind/);
    expect(bad({ v: 1, after: 0, limit: 10 })).toThrow();
  });

  it('a log reply carries signed digests only, and bounded origin pages', async () => {
    const d = signedDigest(await testSigner(), 1, sampleBody('t', 'qwen', 0));
    expect(LogReply.parse({ kind: 'digests', digests: [d], highWater: 1 })).toMatchObject({ highWater: 1 });
    const bad = (x: unknown) => () => parseWith(LogReply, x, 'a log reply from p');
    const { sig: _, ...unsigned } = d;
    expect(bad({ kind: 'digests', digests: [unsigned], highWater: 1 })).toThrow(/digests\.0\.sig/);
    const summary = { origin: 'o', highWater: 1, maxSeq: 1, count: 1 };
    expect(bad({ kind: 'origins', origins: Array(1001).fill(summary), more: false })).toThrow(/origins/);
    expect(bad({ kind: 'origins', origins: [{ ...summary, count: -1 }], more: false })).toThrow(
      /origins\.0\.count/,
    );
  });
});
