/**
 * A bandwidth pacer shared by every stream of a server: each send reserves its bytes on one virtual
 * clock and waits until its slot starts, so sends of any size from any number of streams average
 * at most `bytesPerSecond` (the first send of an idle pacer goes at once). Pure: the clock is passed in.
 */
export interface Pacer {
  /** Reserves `bytes`; returns how long to wait before sending them, ms (0 = now). */
  reserve(bytes: number, now: number): number;
}

/** A pacer at `bytesPerSecond`, or one that never waits when it is undefined or Infinity. */
export function createPacer(bytesPerSecond: number | undefined): Pacer {
  if (bytesPerSecond === undefined || bytesPerSecond === Number.POSITIVE_INFINITY)
    return { reserve: () => 0 };
  if (!Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0)
    throw new RangeError(`bytesPerSecond must be positive, got ${bytesPerSecond}`);
  let free = Number.NEGATIVE_INFINITY; // when the line is next idle, ms
  return {
    reserve(bytes, now) {
      const start = Math.max(free, now);
      free = start + (bytes / bytesPerSecond) * 1000;
      return start - now;
    },
  };
}
