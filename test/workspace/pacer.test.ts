import { describe, expect, it } from 'vitest';
import { createPacer } from '../../node/workspace/pacer.ts';

describe('createPacer', () => {
  it('sends the first reservation at once and paces the next ones at the rate', () => {
    const p = createPacer(1000); // 1000 B/s
    expect(p.reserve(500, 0)).toBe(0);
    expect(p.reserve(500, 0)).toBe(500);
    expect(p.reserve(1000, 0)).toBe(1000);
    expect(p.reserve(10, 100)).toBe(1900);
  });

  it('averages at most the rate over many senders', () => {
    const p = createPacer(10_000);
    let last = 0;
    for (let i = 0; i < 100; i++) last = p.reserve(1000, 0); // 100 kB by many streams at t=0
    expect(last).toBe(9900); // the last starts at 9.9 s: 100 kB take 10 s
  });

  it('does not bank idle time as a burst', () => {
    const p = createPacer(1000);
    p.reserve(1000, 0);
    expect(p.reserve(1000, 60_000)).toBe(0);
    expect(p.reserve(1000, 60_000)).toBe(1000);
  });

  it('never waits without a cap, and refuses a nonsense rate', () => {
    expect(createPacer(undefined).reserve(1e9, 0)).toBe(0);
    for (const bad of [0, -1, Number.NaN]) expect(() => createPacer(bad)).toThrow(/positive/);
  });
});
