import { describe, expect, it } from 'vitest';
import { createFailureDetector, phiOf } from '../../placement/failure-detector.ts';
import { seededRandom } from '../../placement/seeded-random.ts';

const INTERVAL = 1000;

/** Arrival times from a sequence of gaps, starting at 0. */
function arrivals(gaps: number[]): number[] {
  const out = [0];
  for (const g of gaps) out.push(out.at(-1)! + g);
  return out;
}

/**
 * Feeds `times` as heartbeats and checks the peer every `stepMs` in between (as the node's timer
 * does); returns the times at which it was suspected (false suspicions: every heartbeat came).
 */
function falseSuspicions(times: number[], stepMs = 100, options = {}): number[] {
  const d = createFailureDetector({ intervalMs: INTERVAL, ...options });
  const suspicions: number[] = [];
  for (let i = 0; i < times.length; i++) {
    d.heartbeat('p', times[i]!);
    const next = times[i + 1];
    if (next === undefined) break;
    for (let t = times[i]! + stepMs; t < next; t += stepMs) if (d.suspected('p', t)) suspicions.push(t);
  }
  return suspicions;
}

/** The old rule: a peer silent for more than 3 intervals is dropped. */
function oldRuleDrops(times: number[]): number {
  let drops = 0;
  for (let i = 1; i < times.length; i++) if (times[i]! - times[i - 1]! > 3 * INTERVAL) drops++;
  return drops;
}

/** When the peer is first suspected after its last heartbeat at `times.at(-1)`, checking every 100 ms. */
function detectionDelay(times: number[], options = {}, connected = true): number {
  const d = createFailureDetector({ intervalMs: INTERVAL, ...options });
  for (const t of times) d.heartbeat('p', t);
  const last = times.at(-1)!;
  for (let t = last; t < last + 10 * 60_000; t += 100) if (d.suspected('p', t, connected)) return t - last;
  throw new Error('never suspected');
}

describe('phiOf: −log10 of the standard normal upper tail', () => {
  it('is log10(2) at the mean, increasing, and reaches 8 near 5.2 standard deviations', () => {
    expect(phiOf(0)).toBeCloseTo(Math.log10(2), 3);
    let prev = -1;
    for (let y = -6; y <= 12; y += 0.25) {
      expect(phiOf(y)).toBeGreaterThan(prev);
      prev = phiOf(y);
    }
    expect(phiOf(5.2)).toBeGreaterThan(7.5);
    expect(phiOf(5.2)).toBeLessThan(8.5);
    // Tails on both sides add up to one.
    for (const y of [0.5, 1, 2, 3]) expect(10 ** -phiOf(y) + 10 ** -phiOf(-y)).toBeCloseTo(1, 6);
    // Close to the exact normal tail where it matters (1 σ: 0.1587, 2 σ: 0.02275, 3 σ: 0.00135).
    expect(Math.abs(10 ** -phiOf(1) - 0.1587)).toBeLessThan(0.0002);
    expect(Math.abs(10 ** -phiOf(2) - 0.02275)).toBeLessThan(0.0002);
    expect(Math.abs(10 ** -phiOf(3) - 0.00135)).toBeLessThan(0.0002);
    expect(Number.isFinite(phiOf(40))).toBe(true);
  });
});

describe('failure detector: a live but slow node stays up', () => {
  it('regular adverts: never suspected between them', () => {
    const times = arrivals(Array.from({ length: 2000 }, () => INTERVAL));
    expect(falseSuspicions(times)).toEqual([]);
  });

  it('3× jitter under load (gaps anywhere from 0.5 to 3 intervals): no false suspicion in 20,000 adverts', () => {
    const rnd = seededRandom(11);
    const times = arrivals(Array.from({ length: 20_000 }, () => INTERVAL * (0.5 + 2.5 * rnd())));
    expect(falseSuspicions(times)).toEqual([]);
  });

  it('each advert delayed by up to 3 intervals (gaps up to 4 intervals): the old 3-interval rule drops the node, the detector does not', () => {
    const rnd = seededRandom(12);
    const sent = Array.from({ length: 20_000 }, (_, i) => i * INTERVAL);
    const received = sent.map((t) => t + 3 * INTERVAL * rnd());
    // Receive order: a late advert overtaken by a newer one is stale (the view ignores it).
    const times: number[] = [];
    for (const t of received) if (times.length === 0 || t > times.at(-1)!) times.push(t);
    expect(oldRuleDrops(times)).toBeGreaterThan(100);
    expect(falseSuspicions(times)).toEqual([]);
  });

  it('a stalled machine (2 % of gaps are 5 intervals) is learnt: such a pause is then tolerated', () => {
    const rnd = seededRandom(13);
    const gaps = Array.from({ length: 5000 }, () =>
      rnd() < 0.02 ? 5 * INTERVAL : INTERVAL * (0.8 + 0.4 * rnd()),
    );
    const times = arrivals(gaps);
    // Only the first few pauses, before the window has seen any, may be suspected.
    const wrong = falseSuspicions(times);
    const firstPause = times[gaps.findIndex((g) => g === 5 * INTERVAL) + 1]!;
    expect(wrong.every((t) => t <= firstPause)).toBe(true);
  });

  it('a node known to stall gets more time, and its grace shrinks back once the stall leaves the window', () => {
    const d = createFailureDetector({ intervalMs: INTERVAL, windowSize: 50 });
    let t = 0;
    const beat = (gap: number) => {
      t += gap;
      d.heartbeat('p', t);
    };
    beat(0);
    for (let i = 0; i < 50; i++) beat(INTERVAL);
    const regular = d.liveness('p')!.suspectAfterMs;
    beat(10 * INTERVAL);
    const afterStall = d.liveness('p')!.suspectAfterMs;
    expect(afterStall).toBeGreaterThan(regular + 2 * INTERVAL);
    for (let i = 0; i < 50; i++) beat(INTERVAL);
    expect(d.liveness('p')!.suspectAfterMs).toBeCloseTo(regular, 6);
  });
});

describe('failure detector: a dead node is detected within a bound', () => {
  it('regular adverts: suspected after mean + pause + 5.2 σ(floor) ≈ 5.6 intervals, not before 3', () => {
    const times = arrivals(Array.from({ length: 200 }, () => INTERVAL));
    const delay = detectionDelay(times);
    expect(delay).toBeGreaterThan(5 * INTERVAL);
    expect(delay).toBeLessThanOrEqual(6 * INTERVAL);
  });

  it('after 3× jitter: suspected within the maximum silence (12 intervals by default)', () => {
    const rnd = seededRandom(21);
    const times = arrivals(Array.from({ length: 500 }, () => INTERVAL * (0.5 + 2.5 * rnd())));
    const delay = detectionDelay(times);
    expect(delay).toBeGreaterThan(3 * INTERVAL);
    expect(delay).toBeLessThanOrEqual(12 * INTERVAL);
  });

  it('whatever the history, never later than maxSilenceMs', () => {
    const rnd = seededRandom(22);
    const wild = arrivals(Array.from({ length: 300 }, () => INTERVAL * 30 * rnd()));
    expect(detectionDelay(wild, { maxSilenceMs: 8000 })).toBeLessThanOrEqual(8000);
    expect(detectionDelay(wild)).toBe(12 * INTERVAL);
  });

  it('a node whose connection is down is suspected at the minimum silence (3 intervals)', () => {
    const rnd = seededRandom(23);
    const times = arrivals(Array.from({ length: 300 }, () => INTERVAL * (0.5 + 2.5 * rnd())));
    expect(detectionDelay(times, {}, false)).toBe(3 * INTERVAL + 100);
    // ... but a disconnected node that still advertises (through other members) is not.
    const d = createFailureDetector({ intervalMs: INTERVAL });
    for (const t of [0, 1000, 2000, 3000]) d.heartbeat('p', t);
    expect(d.suspected('p', 6000, false)).toBe(false);
    expect(d.suspected('p', 6001, false)).toBe(true);
  });

  it('one advert only: the interval is the prior, so the first silence is judged like a regular node', () => {
    const delay = detectionDelay([0]);
    expect(delay).toBeGreaterThanOrEqual(5 * INTERVAL);
    expect(delay).toBeLessThanOrEqual(6 * INTERVAL);
  });

  it('scales with the advert interval', () => {
    const d = createFailureDetector({ intervalMs: 5000 });
    for (let t = 0; t <= 100_000; t += 5000) d.heartbeat('p', t);
    const after = d.liveness('p')!.suspectAfterMs;
    expect(after).toBeGreaterThan(25_000);
    expect(after).toBeLessThan(30_000);
  });
});

describe('failure detector: bookkeeping', () => {
  it('phi grows with silence, is 0 for unknown peers, and out-of-order heartbeats are ignored', () => {
    const d = createFailureDetector({ intervalMs: INTERVAL });
    expect(d.phi('nobody', 1e9)).toBe(0);
    expect(d.suspected('nobody', 1e9)).toBe(false);
    expect(d.suspected('nobody', 1e9, false)).toBe(false);
    expect(d.liveness('nobody')).toBeUndefined();
    for (const t of [0, 1000, 2000]) d.heartbeat('p', t);
    d.heartbeat('p', 1500);
    expect(d.liveness('p')).toMatchObject({ lastAt: 2000, samples: 2, meanMs: 1000 });
    const phis = [2000, 3000, 4000, 5000, 6000, 8000].map((t) => d.phi('p', t));
    for (let i = 1; i < phis.length; i++) expect(phis[i]!).toBeGreaterThan(phis[i - 1]!);
    expect(phis[0]).toBe(phiOf((0 - 1000 - 2000) / 500));
    expect(d.phi('p', 8000)).toBeGreaterThanOrEqual(8);
    expect(d.suspected('p', 8000)).toBe(true);
  });

  it('remove forgets the history: the next heartbeat starts afresh', () => {
    const d = createFailureDetector({ intervalMs: INTERVAL });
    for (const t of [0, 10_000, 20_000]) d.heartbeat('p', t);
    d.remove('p');
    expect(d.liveness('p')).toBeUndefined();
    d.heartbeat('p', 30_000);
    expect(d.liveness('p')).toMatchObject({ lastAt: 30_000, samples: 0, meanMs: INTERVAL });
  });

  it('keeps the window exact over a long run (no drift from running sums)', () => {
    const d = createFailureDetector({ intervalMs: INTERVAL, windowSize: 10 });
    const rnd = seededRandom(31);
    const times = arrivals([
      ...Array.from({ length: 100_000 }, () => 1e6 * rnd()),
      ...Array.from({ length: 10 }, () => 1234),
    ]);
    for (const t of times) d.heartbeat('p', t);
    const l = d.liveness('p')!;
    expect(l.meanMs).toBeCloseTo(1234, 6);
    expect(l.stdDevMs).toBe(500);
  });

  it('remembers at most maxPeers, forgetting the longest silent', () => {
    const d = createFailureDetector({ intervalMs: INTERVAL, maxPeers: 2 });
    d.heartbeat('a', 0);
    d.heartbeat('b', 10);
    d.heartbeat('a', 20);
    d.heartbeat('c', 30);
    expect(d.liveness('b')).toBeUndefined();
    expect(d.liveness('a')).toBeDefined();
    expect(d.liveness('c')).toBeDefined();
  });

  it('rejects nonsensical options, naming them', () => {
    expect(() => createFailureDetector({ intervalMs: 0 })).toThrow(/intervalMs/);
    expect(() => createFailureDetector({ intervalMs: 1000, threshold: Number.NaN })).toThrow(/threshold/);
    expect(() => createFailureDetector({ intervalMs: 1000, windowSize: 2.5 })).toThrow(/windowSize/);
    expect(() => createFailureDetector({ intervalMs: 1000, minStdDevMs: 0 })).toThrow(/minStdDevMs/);
    expect(() => createFailureDetector({ intervalMs: 1000, acceptablePauseMs: -1 })).toThrow(
      /acceptablePauseMs/,
    );
    expect(() => createFailureDetector({ intervalMs: 1000, minSilenceMs: 5000, maxSilenceMs: 4000 })).toThrow(
      /maxSilenceMs/,
    );
    expect(() => createFailureDetector({ intervalMs: 1000, maxPeers: 0 })).toThrow(/maxPeers/);
  });
});
