/** A seeded source of uniform numbers in [0, 1): same seed, same sequence. */
export type Random = () => number;

/**
 * mulberry32 seeded from a 32-bit integer: fast, small state, good enough for simulations and
 * tie-breaking (not for anything secret).
 */
export function seededRandom(seed: number): Random {
  if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
