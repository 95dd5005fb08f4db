import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  cacheAware,
  cacheAwareRequests,
  chwbl,
  dynamo,
  leastLoaded,
  leastLoadedJobs,
  pullQueue,
  random,
  rendezvous,
  roundRobin,
  vtnode,
} from '../../bench/placement/policies.ts';
import {
  idealMakespan,
  oraclePrefillTokens,
  type Policy,
  type SimContext,
  simulate,
} from '../../bench/placement/sim.ts';
import { K, skewedTrace, standardTrace, TRACES, type Trace } from '../../bench/placement/traces.ts';

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

  describe('the race', () => {
    const race = [
      roundRobin(),
      leastLoaded(),
      cacheAware(),
      leastLoadedJobs(),
      cacheAwareRequests(),
      dynamo(),
      chwbl(),
      pullQueue(),
      vtnode(),
    ];

    it('runs every policy on every trace: each sample once, never beating the oracle or the ideal', () => {
      for (const [name, make] of Object.entries(TRACES)) {
        const trace = make(2, 40);
        for (const policy of race) {
          const r = simulate(trace, policy, { window: 10, seed: 2, sharePrefill: true });
          const label = `${name}/${r.policy}`;
          expect(r.distinctSamples, label).toBe(trace.jobs.length * K);
          expect(r.samples, label).toBeGreaterThanOrEqual(r.distinctSamples);
          expect(r.prefillTokens, label).toBeGreaterThanOrEqual(oraclePrefillTokens(trace));
          expect(r.prefillTokens, label).toBe((r.samples - r.hits) * trace.promptTokens);
          expect(r.makespan, label).toBeGreaterThanOrEqual(idealMakespan(trace));
          // Churn loses work in flight; a fault-free trace runs each sample exactly once.
          if (!trace.faults) expect(r.samples, label).toBe(r.distinctSamples);
        }
      }
    });

    it('churn disconnects and pauses laptops, and their work is sent again', () => {
      const trace = TRACES['churn']!(2, 60);
      expect(trace.faults?.some((f) => f.kind === 'pause')).toBe(true);
      for (const policy of [dynamo(), pullQueue(), roundRobin(), vtnode()]) {
        const r = simulate(trace, policy, { window: 12, seed: 2 });
        expect(r.replacedSamples, r.policy).toBeGreaterThan(0);
        expect(r.distinctSamples).toBe(trace.jobs.length * K);
      }
    });

    /** One task on one 4-slot node: what a cold server pays. */
    const single = (): Trace => ({
      ...standardTrace(1, 1),
      nodes: [{ ...standardTrace(1, 1).nodes[0]!, concurrency: 4 }],
    });

    it('an n = k request prefills once on a cold server, then decodes k streams in its slots', () => {
      for (const policy of [cacheAwareRequests(), dynamo(), chwbl()]) {
        const r = simulate(single(), policy, { window: 1, seed: 1 });
        expect(r.prefillTokens).toBe(single().promptTokens);
        expect(r.hits).toBe(K - 1);
        // One prefill (12 s at speed 1.5), then k decodes over 4 slots: well under k serial samples.
        expect(r.makespan).toBeLessThan(12_000 / 1500 + (K / 2) * (700 / 60) + 1);
      }
    });

    it('prefill sharing never pays two prefills for one in-flight prompt', () => {
      const allOnOne = (): ((ctx: SimContext) => Policy) => () => ({
        kind: 'sample',
        name: 'all on one',
        route: (_job, _s, eligible) => eligible[0]!,
      });
      const shared = simulate(single(), allOnOne(), { window: 1, seed: 1, sharePrefill: true });
      expect(shared.prefillTokens).toBe(single().promptTokens);
      const unshared = simulate(single(), allOnOne(), { window: 1, seed: 1 });
      // Without sharing, the four samples that start together each pay the prompt.
      expect(unshared.prefillTokens).toBe(4 * single().promptTokens);
    });

    it('prints the --json shape: every policy on every trace, vtnode keyed `vtnode`', () => {
      const script = fileURLToPath(new URL('../../bench/placement.ts', import.meta.url));
      const stdout = execFileSync(
        process.execPath,
        [script, '--json', '--tasks', '12', '--seeds', '0', '--traces', 'standard,churn'],
        { encoding: 'utf8' },
      );
      const Ratios = z.object({ prefillRatio: z.number().min(1), makespanRatio: z.number().min(1) }).strict();
      const Out = z.object({ traces: z.record(z.string(), z.record(z.string(), Ratios)) }).strict();
      const out = Out.parse(JSON.parse(stdout));
      expect(Object.keys(out.traces)).toEqual(['standard', 'churn']);
      for (const policies of Object.values(out.traces)) {
        expect(policies['vtnode']).toBeDefined();
        expect(policies['pull queue (per task)']).toBeDefined();
        expect(Object.keys(policies).length).toBeGreaterThanOrEqual(10);
      }
    });
  });
});
