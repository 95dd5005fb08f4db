import { describe, expect, it } from 'vitest';
import {
  cacheAware,
  leastLoaded,
  leastLoadedJobs,
  random,
  rendezvous,
  roundRobin,
  vtnode,
} from '../../bench/placement/policies.ts';
import { idealMakespan, oraclePrefillTokens, simulate } from '../../bench/placement/sim.ts';
import { K, skewedTrace, standardTrace } from '../../bench/placement/traces.ts';

// The benchmark's simulator must itself be right for its ratios to mean anything.
describe('placement simulator', () => {
  const traces = [standardTrace(3, 60), skewedTrace(3, 60)];
  const makers = [
    roundRobin(),
    random(),
    leastLoaded(),
    cacheAware(),
    leastLoadedJobs(),
    rendezvous(),
    vtnode(),
  ];

  it('runs every sample exactly once and never beats the oracle or the ideal', () => {
    for (const trace of traces) {
      for (const make of makers) {
        const r = simulate(trace, make, { window: 10, seed: 3 });
        expect(r.samples).toBe(trace.jobs.length * K);
        expect(r.distinctSamples).toBe(r.samples);
        expect(r.perNode.reduce((a, n) => a + n.samples, 0)).toBe(r.samples);
        expect(r.prefillTokens).toBeGreaterThanOrEqual(oraclePrefillTokens(trace));
        expect(r.makespan).toBeGreaterThanOrEqual(idealMakespan(trace));
        // Every miss pays the whole prompt, every hit none.
        expect(r.prefillTokens).toBe((r.samples - r.hits) * trace.promptTokens);
      }
    }
  });

  it('is deterministic for a seed', () => {
    const a = simulate(traces[1]!, random(), { window: 10, seed: 9 });
    const b = simulate(traces[1]!, random(), { window: 10, seed: 9 });
    expect(b).toEqual(a);
  });

  it('places jobs only on nodes holding their workspace', () => {
    const trace = skewedTrace(5, 80);
    const holders = new Map(trace.nodes.map((n) => [n.id, new Set(n.workspaces)]));
    const seen: [string, string][] = [];
    simulate(
      trace,
      (ctx) => {
        const inner = vtnode()(ctx);
        if (inner.kind !== 'job') throw new Error('vtnode places jobs');
        return {
          ...inner,
          place(job, eligible, now, samples) {
            const node = inner.place(job, eligible, now, samples);
            seen.push([node.spec.id, job.workspace]);
            return node;
          },
        };
      },
      { window: 10, seed: 5 },
    );
    expect(seen).toHaveLength(80);
    for (const [id, ws] of seen) expect(holders.get(id)!.has(ws)).toBe(true);
  });

  it('re-places exactly the lost samples when nodes drop or refuse, through the real lease book', () => {
    const trace = standardTrace(4, 80);
    for (const reputation of [true, false]) {
      const r = simulate(trace, vtnode({}, 'vtnode', { reputation }), {
        window: 12,
        seed: 4,
        faults: [
          { node: 'studio-1', kind: 'disconnect', at: 100, until: 300 },
          { node: 'max-1', kind: 'disconnect', at: 150, until: Number.POSITIVE_INFINITY },
          { node: 'studio-2', kind: 'refuse', at: 50, until: 400 },
        ],
      });
      expect(r.replacedSamples).toBeGreaterThan(0);
      expect(r.refusals).toBeGreaterThan(0);
      // Lost samples ran again, but every (task, sample) counted exactly once.
      expect(r.distinctSamples).toBe(trace.jobs.length * K);
      expect(r.samples).toBeGreaterThan(trace.jobs.length * K);
    }
  });

  it('rejects a fault on an unknown node', () => {
    expect(() =>
      simulate(standardTrace(1, 5), vtnode(), {
        window: 2,
        seed: 1,
        faults: [{ node: 'nope', kind: 'refuse', at: 1, until: 2 }],
      }),
    ).toThrow(/unknown node nope/);
  });

  it('computes the ideal makespan as the worst workspace-restricted fluid bound', () => {
    const trace = standardTrace(1, 10);
    const work = trace.jobs.reduce((a, j) => a + 12 + j.decodeTokens.reduce((x, y) => x + y, 0) / 40, 0);
    const throughput = trace.nodes.reduce((a, n) => a + n.speed * n.concurrency, 0);
    expect(idealMakespan(trace)).toBeCloseTo(work / throughput, 9);
    expect(oraclePrefillTokens(trace)).toBe(10 * 12_000);
  });
});
