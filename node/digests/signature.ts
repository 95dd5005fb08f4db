import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import type { PrivateKey } from '@libp2p/interface';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { claimOf, type Digest, digestSigningBytes, type SignedDigest } from '../../protocol/digest.ts';

/** Signs this node's digests with its libp2p key (synchronously: a sample log signs inside its transaction). */
export interface DigestSigner {
  /** Peer id of the key: the origin of every digest it signs. */
  readonly origin: string;
  /** The claim with its signature; refuses a digest of another origin. */
  sign(digest: Digest): SignedDigest;
}

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

/** A signer over a node's Ed25519 libp2p private key (vtnode identities are Ed25519). */
export function digestSigner(key: PrivateKey): DigestSigner {
  if (key.type !== 'Ed25519')
    throw new TypeError(`digests are signed with Ed25519 keys; this key is ${key.type}`);
  // libp2p keeps an Ed25519 private key as seed (32 bytes) followed by the public key (32 bytes).
  const keyObject = createPrivateKey({
    format: 'jwk',
    key: { kty: 'OKP', crv: 'Ed25519', d: b64url(key.raw.subarray(0, 32)), x: b64url(key.raw.subarray(32)) },
  });
  const origin = peerIdFromPrivateKey(key).toString();
  return {
    origin,
    sign(digest) {
      if (digest.origin !== origin)
        throw new Error(`cannot sign a digest of origin ${digest.origin} with the key of ${origin}`);
      const claim = claimOf(digest);
      return { ...claim, sig: b64url(sign(null, digestSigningBytes(claim), keyObject)) };
    },
  };
}

/** Public keys of origins seen lately (peer id → key, or why the id has none); bounded. */
const originKeys = new Map<string, KeyObject | string>();
const MAX_CACHED_KEYS = 4096;

function originKey(origin: string): KeyObject | string {
  const cached = originKeys.get(origin);
  if (cached !== undefined) return cached;
  let found: KeyObject | string;
  try {
    const peer = peerIdFromString(origin);
    if (peer.type !== 'Ed25519') found = `origin ${origin} is a ${peer.type} peer id, not Ed25519`;
    else
      found = createPublicKey({
        format: 'jwk',
        key: { kty: 'OKP', crv: 'Ed25519', x: b64url(peer.publicKey.raw) },
      });
  } catch (err) {
    found = `origin ${origin} is not a peer id (${(err as Error).message})`;
  }
  if (originKeys.size >= MAX_CACHED_KEYS) originKeys.delete(originKeys.keys().next().value!);
  originKeys.set(origin, found);
  return found;
}

/**
 * Why a signed digest does not verify against its origin's public key (embedded in the origin's
 * Ed25519 peer id), or null when it does.
 */
export function signatureError(digest: SignedDigest): string | null {
  const key = originKey(digest.origin);
  if (typeof key === 'string') return key;
  let ok = false;
  try {
    ok = verify(null, digestSigningBytes(digest), key, Buffer.from(digest.sig, 'base64url'));
  } catch {
    ok = false;
  }
  return ok ? null : `the signature of seq ${digest.seq} does not verify against ${digest.origin}'s key`;
}

/** Digests another node served for `origin`: those whose signature verifies, and the forged rest. */
export interface RelayCheck {
  valid: SignedDigest[];
  /** Digests of another origin than the one asked for, or whose signature does not verify. */
  forged: { digest: SignedDigest; why: string }[];
}

/** Checks a page of digests relayed for `origin` (by the origin itself or by any holder). */
export function checkRelayed(origin: string, digests: readonly SignedDigest[]): RelayCheck {
  const out: RelayCheck = { valid: [], forged: [] };
  for (const d of digests) {
    const why = d.origin !== origin ? `a digest of ${d.origin} served for ${origin}` : signatureError(d);
    if (why) out.forged.push({ digest: d, why });
    else out.valid.push(d);
  }
  return out;
}
