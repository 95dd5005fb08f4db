import { generateKeyPair, generateKeyPairFromSeed } from '@libp2p/crypto/keys';
import { type DigestSigner, digestSigner } from '../../node/digests/signature.ts';
import { claimFor, type SignedDigest } from '../../protocol/digest.ts';
import type { SampleBody } from '../../protocol/sample.ts';

/** A signer over a fresh Ed25519 key: an origin whose digests verify. */
export async function testSigner(): Promise<DigestSigner> {
  return digestSigner(await generateKeyPair('Ed25519'));
}

/** The signed digest `signer`'s node would publish for `body` logged at `seq`. */
export function signedDigest(signer: DigestSigner, seq: number, body: SampleBody): SignedDigest {
  return signer.sign(claimFor(body, signer.origin, seq));
}

/** A signer over a fixed Ed25519 key (the same origin in every process that asks for seed `n`). */
export async function seededSigner(n: number): Promise<DigestSigner> {
  return digestSigner(await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(n)));
}
