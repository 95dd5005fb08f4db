import { describe, expect, it } from 'vitest';
import { type ProbeHealth, type ProbeOutcome, probeHealthModel } from '../../node/models/probe-health.ts';

function run(outcomes: ProbeOutcome[], options = {}): ProbeHealth[] {
  const model = probeHealthModel(options);
  const out: ProbeHealth[] = [];
  let h = model.initial;
  for (const o of outcomes) {
    h = model.next(h, o);
    out.push(h);
  }
  return out;
}

describe('probe health: slow is not down', () => {
  it('starts unknown with the base timeout, and is up after an answer', () => {
    const model = probeHealthModel();
    expect(model.initial).toEqual({ status: 'unknown', timeouts: 0, timeoutMs: 3000, retryNow: false });
    expect(model.serving(model.initial)).toBe(false);
    expect(run(['ok'])).toEqual([{ status: 'up', timeouts: 0, timeoutMs: 3000, retryNow: false }]);
  });

  it('a server that is up and times out stays served, is retried at once with twice the time, and is down after 3 in a row', () => {
    const model = probeHealthModel();
    const hs = run(['ok', 'timeout', 'timeout', 'timeout']);
    expect(hs.map((h) => [h.status, h.timeouts, h.timeoutMs, h.retryNow])).toEqual([
      ['up', 0, 3000, false],
      ['slow', 1, 6000, true],
      ['slow', 2, 12000, true],
      ['down', 3, 24000, false],
    ]);
    expect(hs.map((h) => model.serving(h))).toEqual([true, true, true, false]);
  });

  it('an answer after timeouts resets the count and the timeout', () => {
    const hs = run(['ok', 'timeout', 'timeout', 'ok', 'timeout']);
    expect(hs.at(-2)).toEqual({ status: 'up', timeouts: 0, timeoutMs: 3000, retryNow: false });
    expect(hs.at(-1)).toMatchObject({ status: 'slow', timeouts: 1 });
  });

  it('refused, reset or a bad answer is down at once, whatever came before', () => {
    for (const before of [[], ['ok'], ['ok', 'timeout']] as ProbeOutcome[][]) {
      const hs = run([...before, 'down']);
      expect(hs.at(-1)).toEqual({ status: 'down', timeouts: 0, timeoutMs: 3000, retryNow: false });
    }
  });

  it('a server never seen up that times out is retried (a slow first answer) but not served meanwhile', () => {
    const model = probeHealthModel();
    const hs = run(['timeout', 'timeout', 'ok']);
    expect(hs.map((h) => h.status)).toEqual(['unknown', 'unknown', 'up']);
    expect(hs.map((h) => model.serving(h))).toEqual([false, false, true]);
    expect(hs.map((h) => h.retryNow)).toEqual([true, true, false]);
  });

  it('a down server that times out is retried with more time but stays down until it answers', () => {
    const hs = run(['down', 'timeout', 'timeout', 'timeout', 'timeout', 'ok']);
    expect(hs.map((h) => h.status)).toEqual(['down', 'down', 'down', 'down', 'down', 'up']);
    // Retries in a row are bounded by maxTimeouts: the streak then waits for the next interval.
    expect(hs.map((h) => h.retryNow)).toEqual([false, true, true, false, false, false]);
  });

  it('caps the timeout and honours its options', () => {
    const hs = run(['ok', 'timeout', 'timeout', 'timeout', 'timeout', 'timeout'], {
      timeoutMs: 100,
      maxTimeoutMs: 350,
      maxTimeouts: 5,
    });
    expect(hs.map((h) => h.timeoutMs)).toEqual([100, 200, 350, 350, 350, 350]);
    expect(hs.map((h) => h.status)).toEqual(['up', 'slow', 'slow', 'slow', 'slow', 'down']);
    // A cap below the base timeout is raised to it.
    const low = probeHealthModel({ timeoutMs: 500, maxTimeoutMs: 100 });
    expect(low.next(low.initial, 'timeout').timeoutMs).toBe(500);
  });

  it('rejects nonsensical options, naming them', () => {
    expect(() => probeHealthModel({ timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => probeHealthModel({ maxTimeoutMs: Number.NaN })).toThrow(/maxTimeoutMs/);
    expect(() => probeHealthModel({ maxTimeouts: 1.5 })).toThrow(/maxTimeouts must be a positive integer/);
  });
});
