import { sha256Hex } from '../../protocol/canonical.ts';

/** A deterministic pseudo-random source (mulberry32): the same seed gives the same sequence. */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
}

export function rng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n) => Math.floor(next() * n) };
}

/** A 32-bit seed derived from any strings (sha256 of their join). */
export function seedOf(...parts: (string | number)[]): number {
  return Number.parseInt(sha256Hex(parts.join('\u0000')).slice(0, 8), 16);
}
