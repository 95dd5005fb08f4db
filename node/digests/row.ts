import type { Digest, SignedDigest } from '../../protocol/digest.ts';

/**
 * A signed digest as the sqlite stores keep it (the worker's sample log and the collector's dataset
 * index): one column per digest field, written and read here only, so the two stores and the wire
 * shape cannot drift apart field by field.
 */
export interface DigestRow {
  seq: number;
  sample_id: string;
  task_id: string;
  model: string;
  split: string;
  reward: number;
  content_hash: string;
  eval_fingerprint: string;
  sig: string;
  task_hash: string | null;
}

/** The digest columns in the order digestValues gives them (the origin is the caller's: a column or the log's own). */
export const DIGEST_ROW_COLUMNS =
  'seq, sample_id, task_id, model, split, reward, content_hash, eval_fingerprint, sig, task_hash';

/** The values of DIGEST_ROW_COLUMNS for a signed digest, in that order. */
export function digestValues(
  d: SignedDigest,
): [number, string, string, string, string, number, string, string, string, string | null] {
  return [
    d.seq,
    d.sampleId,
    d.taskId,
    d.model,
    d.split,
    d.reward,
    d.contentHash,
    d.evalFingerprint,
    d.sig,
    d.taskHash ?? null,
  ];
}

/** The signed digest a row holds: v2 when it keeps a task hash, v1 otherwise. */
export function digestOfRow(r: DigestRow, origin: string): SignedDigest {
  return {
    v: r.task_hash ? 2 : 1,
    sampleId: r.sample_id,
    taskId: r.task_id,
    model: r.model,
    split: r.split as Digest['split'],
    reward: r.reward,
    contentHash: r.content_hash,
    evalFingerprint: r.eval_fingerprint,
    origin,
    seq: r.seq,
    ...(r.task_hash ? { taskHash: r.task_hash } : {}),
    sig: r.sig,
  };
}

/** True when a row holds exactly the claim of `d` (every signed field but the signature itself). */
export function rowClaims(r: DigestRow, d: Digest): boolean {
  return (
    r.sample_id === d.sampleId &&
    r.task_id === d.taskId &&
    r.model === d.model &&
    r.split === d.split &&
    r.reward === d.reward &&
    r.content_hash === d.contentHash &&
    r.eval_fingerprint === d.evalFingerprint &&
    (r.task_hash ?? undefined) === d.taskHash
  );
}
