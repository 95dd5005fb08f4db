import { z } from 'zod';
import { Sha256Id } from './task.ts';

/** Largest digest a node publishes or accepts, bytes of JSON. */
export const MAX_DIGEST_BYTES = 2048;
/** Most digests one /vtnode/log/1 reply frame carries. */
export const MAX_LOG_DIGESTS_PER_FRAME = 500;
/** Largest frame on /vtnode/log/1, bytes (a full batch of digests fits). */
export const MAX_LOG_FRAME_BYTES = MAX_LOG_DIGESTS_PER_FRAME * MAX_DIGEST_BYTES + 4096;

/**
 * What a worker gossips per scored sample (DESIGN.md "Digest"): enough to decide whether to fetch
 * the body, and to check the body once fetched. Signed by the origin's libp2p key (StrictSign).
 */
export const Digest = z.object({
  /** Schema version of the digest. */
  v: z.literal(1),
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
  /** Peer id of the worker that generated and scored it (must equal the gossip signer). */
  origin: z.string().min(1).max(128),
  /** The origin's sample-log sequence number: 1, 2, 3, ... without gaps, per origin. */
  seq: z.number().int().min(1),
});
export type Digest = z.infer<typeof Digest>;
