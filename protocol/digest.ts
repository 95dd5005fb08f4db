import { z } from 'zod';
import { canonicalJson } from './canonical.ts';
import type { SampleBody } from './sample.ts';
import { Sha256Id } from './task.ts';

/** Largest digest a node publishes or accepts, bytes of JSON. */
export const MAX_DIGEST_BYTES = 2048;
/** Most digests one /vtnode/log/2 reply frame carries. */
export const MAX_LOG_DIGESTS_PER_FRAME = 500;
/** Largest frame on /vtnode/log/2, bytes (a full batch of digests fits). */
export const MAX_LOG_FRAME_BYTES = MAX_LOG_DIGESTS_PER_FRAME * MAX_DIGEST_BYTES + 4096;

/**
 * What a worker claims per scored sample (DESIGN.md "Digest"): enough to decide whether to fetch
 * the body, and to check the body once fetched. On the wire and in every store it travels as a
 * SignedDigest: these fields plus the origin's signature over digestSigningBytes.
 */
const DigestFields = z.object({
  /**
   * Schema version of the digest: 2 commits to the task row (`taskHash`); 1 (before tasks travelled
   * over the mesh) does not, and is still read, verified and relayed as its origin signed it.
   */
  v: z.union([z.literal(1), z.literal(2)]),
  /** sampleId(task id, model, sample index, seed). */
  sampleId: Sha256Id,
  /** Task the sample answers. */
  taskId: z.string().min(1).max(200),
  /** Model that generated it. */
  model: z.string().min(1).max(256),
  /** The task's split. */
  split: z.enum(['train', 'eval']),
  /** Reward in [0, 1] from the origin's sandbox. */
  reward: z.number().min(0).max(1),
  /** sha256 of the candidate text. */
  contentHash: Sha256Id,
  /** Evaluation fingerprint the reward was computed under. */
  evalFingerprint: Sha256Id,
  /** Peer id of the worker that generated and scored it (an Ed25519 peer id: its key checks `sig`). */
  origin: z.string().min(1).max(128),
  /** The origin's sample-log sequence number: 1, 2, 3, ... without gaps, per origin. */
  seq: z.number().int().min(1),
  /** taskHash() of the task row the sample answers (version 2 only; present exactly when v is 2). */
  taskHash: Sha256Id.optional(),
});

/** A digest's version and task hash agree: v 2 carries taskHash, v 1 does not. */
const versionAgrees = (d: { v: 1 | 2; taskHash?: string | undefined }) =>
  (d.v === 2) === (d.taskHash !== undefined);
const VERSION_MESSAGE = {
  message: 'a v2 digest carries taskHash and a v1 digest does not',
  path: ['taskHash'],
};

export const Digest = DigestFields.refine(versionAgrees, VERSION_MESSAGE);
export type Digest = z.infer<typeof Digest>;

/** An Ed25519 signature: 64 bytes as unpadded base64url. */
export const DigestSignature = z
  .string()
  .regex(/^[A-Za-z0-9_-]{85}[AQgw]$/, 'expected an Ed25519 signature (64 bytes, base64url)');

/**
 * A digest with its origin's signature: verifiable by anyone who relays or receives it, since an
 * Ed25519 peer id embeds its public key. Gossiped by the origin, served by any node that holds it
 * (/vtnode/log/2), stored by workers and collectors as is.
 */
export const SignedDigest = DigestFields.extend({
  /** The origin's Ed25519 signature over digestSigningBytes(the other fields). */
  sig: DigestSignature,
}).refine(versionAgrees, VERSION_MESSAGE);
export type SignedDigest = z.infer<typeof SignedDigest>;

/** Domain prefix of the signed bytes: a digest signature means nothing in any other context. */
export const DIGEST_SIGNING_DOMAIN = 'vtnode/digest/1\n';

/**
 * The bytes an origin signs for a digest: the domain prefix, then the canonical JSON of exactly the
 * Digest fields (a `sig` or any other extra member is left out; key order does not matter).
 */
export function digestSigningBytes(digest: Digest): Uint8Array {
  return new TextEncoder().encode(DIGEST_SIGNING_DOMAIN + canonicalJson(claimOf(digest)));
}

/** The unsigned claim of a digest (its `sig` and any other member dropped; taskHash kept in v2 only). */
export function claimOf(digest: Digest): Digest {
  const { v, sampleId, taskId, model, split, reward, contentHash, evalFingerprint, origin, seq } = digest;
  const claim: Digest = {
    v,
    sampleId,
    taskId,
    model,
    split,
    reward,
    contentHash,
    evalFingerprint,
    origin,
    seq,
  };
  if (v === 2 && digest.taskHash !== undefined) claim.taskHash = digest.taskHash;
  return claim;
}

/**
 * The digest an origin claims for one of its scored samples: v2, committing to the task row's hash,
 * when it is given (every sample a worker scores now); v1 for a row logged before tasks were kept.
 */
export function claimFor(body: SampleBody, origin: string, seq: number, taskHash?: string | null): Digest {
  return {
    v: taskHash ? 2 : 1,
    sampleId: body.sampleId,
    taskId: body.taskId,
    model: body.model,
    split: body.split,
    reward: body.score.reward,
    contentHash: body.contentHash,
    evalFingerprint: body.score.evalFingerprint,
    origin,
    seq,
    ...(taskHash ? { taskHash } : {}),
  };
}
