import { hash } from 'node:crypto';

/** One candidate for weighted rendezvous hashing. */
export interface HrwCandidate {
  /** Stable identity of the candidate (a peer id). */
  id: string;
  /** Relative weight, > 0: a candidate of weight 2 owns about twice as many keys as one of weight 1. */
  weight: number;
}

/** A candidate with its rendezvous score for one key. */
export interface HrwRanked extends HrwCandidate {
  /** Score for the key; the highest score owns the key. */
  score: number;
}

const TWO_POW_53 = 2 ** 53;

/**
 * A uniform number in (0, 1) derived from `key` and `id`: the first 53 bits of
 * sha256(key NUL id), shifted by half a unit so it is never 0 or 1.
 */
export function hrwUniform(key: string, id: string): number {
  // One-shot hash of the same bytes as update(key).update('\0').update(id): 2-3× cheaper per call,
  // and the ranking hashes every eligible node for every placement.
  const digest = hash('sha256', `${key}\0${id}`, 'buffer');
  // 21 high bits + 32 low bits = 53 bits, exactly representable in a double.
  const high = digest.readUInt32BE(0) >>> 11;
  const low = digest.readUInt32BE(4);
  return (high * 2 ** 32 + low + 0.5) / TWO_POW_53;
}

/**
 * Weighted rendezvous score (Schindelhauer & Schomaker's logarithmic method): `-weight / ln(u)`.
 * For a fixed key, the candidate with the highest score wins; a candidate's chance of winning is
 * its weight over the total weight, and adding or removing a candidate only moves the keys it
 * wins or owned. A weight of 0 (or less) never wins.
 */
export function hrwScore(key: string, id: string, weight: number): number {
  if (!(weight > 0)) return Number.NEGATIVE_INFINITY;
  return -weight / Math.log(hrwUniform(key, id));
}

/**
 * Candidates ranked for `key`, best first. Deterministic and independent of input order:
 * equal scores (practically impossible) fall back to comparing ids.
 */
export function hrwRank(key: string, candidates: readonly HrwCandidate[]): HrwRanked[] {
  return candidates
    .map((c) => ({ id: c.id, weight: c.weight, score: hrwScore(key, c.id, c.weight) }))
    .sort((a, b) => (b.score !== a.score ? b.score - a.score : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
