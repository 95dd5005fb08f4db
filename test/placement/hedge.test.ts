import { describe, expect, it } from 'vitest';
import { createHedger, HEDGE_DEFAULTS, scaledHedge, type WatchedJob } from '../../placement/hedge.ts';

const job = (jobId: string, lastProgressAt: number, extra: Partial<WatchedJob> = {}): WatchedJob => ({
  jobId,
  peerId: `p-${jobId}`,
  model: 'm',
  lastProgressAt,
  hedged: false,
  ...extra,
});

describe('hedger', () => {
  it('rejects bad options and bad gaps', () => {
    expect(() => createHedger({ minStallMs: 0 })).toThrow(/minStallMs/);
    expect(() => createHedger({ factor: Number.NaN })).toThrow(/factor/);
    expect(() => createHedger({ unmeasuredStallMs: -1 })).toThrow(/unmeasuredStallMs/);
    expect(() => createHedger({ window: 0 })).toThrow(/window/);
    expect(() => createHedger({ beatGraceMs: 0 })).toThrow(/beatGraceMs/);
    expect(() => createHedger().gap('m', -1)).toThrow(/gap/);
    expect(() => createHedger().gap('m', Number.POSITIVE_INFINITY)).toThrow(/gap/);
  });

  it('waits the unmeasured stall while nothing is measured, then a multiple of the 90th-percentile gap, never less than the floor', () => {
    const h = createHedger({ minStallMs: 1000, factor: 4, unmeasuredStallMs: 60_000 });
    expect(h.typicalGap('m')).toBeNull();
    expect(h.stallMs('m')).toBe(60_000);
    for (let i = 1; i <= 10; i++) h.gap('m', i * 100); // 100 … 1000 ms
    expect(h.typicalGap('m')).toBe(1000);
    expect(h.stallMs('m')).toBe(4000);
    // Another model with no gaps of its own borrows the fleet's; fast gaps stop at the floor.
    expect(h.stallMs('other')).toBe(4000);
    const fast = createHedger({ minStallMs: 1000, factor: 4 });
    fast.gap('m', 10);
    expect(fast.stallMs('m')).toBe(1000);
  });

  it('scaledHedge runs every wait on a faster clock and keeps the factor and window', () => {
    expect(scaledHedge(0.25)).toEqual({ minStallMs: 7500, unmeasuredStallMs: 45_000, beatGraceMs: 15_000 });
    expect(() => scaledHedge(0)).toThrow(/scale/);
    expect(() => scaledHedge(Number.NaN)).toThrow(/scale/);
    const h = createHedger(scaledHedge(0.5));
    expect(h.stallMs('m')).toBe(HEDGE_DEFAULTS.unmeasuredStallMs / 2);
    h.gap('m', 1); // a fast gap: the floor, halved
    expect(h.stallMs('m')).toBe(HEDGE_DEFAULTS.minStallMs / 2);
    h.gap('m', 60_000); // a slow gap: the factor is not scaled
    expect(h.stallMs('m')).toBe(HEDGE_DEFAULTS.factor * 60_000);
  });

  it('remembers only the last `window` gaps of a model', () => {
    const h = createHedger({ window: 4, minStallMs: 1 });
    for (const g of [10_000, 10_000, 10_000, 10_000]) h.gap('m', g);
    expect(h.typicalGap('m')).toBe(10_000);
    for (const g of [50, 60, 70, 80]) h.gap('m', g);
    expect(h.typicalGap('m')).toBe(80);
  });

  it('picks the jobs silent past their stall, longest silent first, never one already hedged', () => {
    const h = createHedger({ minStallMs: 1000, unmeasuredStallMs: 5000 });
    h.gap('fast', 100);
    const jobs = [
      job('a', 0, { model: 'fast' }), // silent 10 s > 1 s
      job('b', 9500, { model: 'fast' }), // silent 0.5 s
      job('c', 4000, { model: 'slow' }), // 'slow' borrows the fleet's gaps: stall 1 s
      job('d', 0, { model: 'fast', hedged: true }),
    ];
    expect(h.stalled(jobs, 10_000).map((j) => j.jobId)).toEqual(['a', 'c']);
    // Nothing measured: every job waits the unmeasured stall (5 s).
    const unmeasured = createHedger({ unmeasuredStallMs: 5000 });
    expect(unmeasured.stalled(jobs, 10_000).map((j) => j.jobId)).toEqual(['a', 'c']);
    expect(unmeasured.stalled(jobs, 8_000).map((j) => j.jobId)).toEqual(['a']);
  });

  it('a node whose samples are in its sandbox (fresh heartbeats) gets beatGraceMs more, then is backed up all the same', () => {
    const h = createHedger({ minStallMs: 1000, unmeasuredStallMs: 1000, beatGraceMs: 2000 });
    // Silent since 0; its heartbeat is fresh (within one stall) until 2500 + 1000.
    const beating = job('a', 0, { beatAt: 2500 });
    const silent = job('b', 0);
    expect(h.stalled([beating, silent], 1500).map((j) => j.jobId)).toEqual(['b']);
    expect(h.stalled([beating, silent], 2999).map((j) => j.jobId)).toEqual(['b']);
    // Past the stall time + the grace since its last real progress, beats no longer keep it.
    expect(h.stalled([beating, silent], 3001).map((j) => j.jobId)).toEqual(['a', 'b']);
    // A stale heartbeat (older than one stall) counts for nothing.
    expect(h.stalled([job('c', 0, { beatAt: 200 })], 1500).map((j) => j.jobId)).toEqual(['c']);
    // A heartbeat of one job of a node covers the node's other jobs (silence is the node's).
    const sibling = job('d', 0, { peerId: 'p-a' });
    expect(h.stalled([beating, sibling], 2000)).toEqual([]);
    // The grace is added, not multiplied: with long measured gaps (stall 40 s) it is still 2 s.
    const slow = createHedger({ minStallMs: 1000, beatGraceMs: 2000 });
    for (let i = 0; i < 10; i++) slow.gap('m', 10_000);
    expect(slow.stallMs('m')).toBe(40_000);
    const beatingSlow = job('e', 0, { beatAt: 41_000 });
    expect(slow.stalled([beatingSlow], 41_500)).toEqual([]);
    expect(slow.stalled([beatingSlow], 42_001).map((j) => j.jobId)).toEqual(['e']);
  });

  it("counts a node's silence, not a job's: a job queued behind its node's progressing jobs is not backed up", () => {
    const h = createHedger({ minStallMs: 1000 });
    h.gap('m', 100);
    const jobs = [
      // Queued on p1 for 10 s while p1's other job progressed 0.5 s ago.
      job('queued', 0, { peerId: 'p1' }),
      job('running', 9500, { peerId: 'p1' }),
      // Queued on p2 whose last progress was a job that has finished (no longer watched).
      job('after-finished', 0, { peerId: 'p2', nodeProgressAt: 9800 }),
      // p3 sent nothing on either job for 10 s: both are stalled.
      job('silent-1', 0, { peerId: 'p3' }),
      job('silent-2', 500, { peerId: 'p3' }),
      // p4's node-wide progress is old too.
      job('old', 0, { peerId: 'p4', nodeProgressAt: 2000 }),
    ];
    expect(h.stalled(jobs, 10_000).map((j) => j.jobId)).toEqual(['silent-1', 'silent-2', 'old']);
    // Once p1 falls silent as a whole, both its jobs are stalled.
    expect(
      h
        .stalled(jobs, 10_600)
        .map((j) => j.jobId)
        .sort(),
    ).toEqual(['old', 'queued', 'running', 'silent-1', 'silent-2'].sort());
  });
});
