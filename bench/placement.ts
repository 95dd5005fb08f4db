/**
 * Placement simulator: compares routing policies on a standard and a skewed trace, in one run,
 * against the oracle (fewest prefills) and the ideal makespan. Deterministic for a given seed.
 *
 *   npx node bench/placement.ts [--seed N] [--tasks N] [--window N] [--seeds N]
 */
import { parseArgs } from 'node:util';
import {
  cacheAware,
  leastLoaded,
  leastLoadedJobs,
  random,
  rendezvous,
  roundRobin,
  vtnode,
} from './placement/policies.ts';
import {
  ADVERT_INTERVAL_S,
  DECODE_TOKENS_PER_S,
  idealMakespan,
  oraclePrefillTokens,
  type Policy,
  PREFILL_TOKENS_PER_S,
  type SimContext,
  type SimFault,
  type SimResult,
  simulate,
} from './placement/sim.ts';
import { K, skewedTrace, standardTrace, type Trace } from './placement/traces.ts';

function args() {
  try {
    return parseArgs({
      options: {
        seed: { type: 'string', default: '1' },
        tasks: { type: 'string', default: '500' },
        window: { type: 'string' },
        seeds: { type: 'string', default: '5' },
      },
    });
  } catch (err) {
    console.error(
      `${(err as Error).message}\nusage: npx node bench/placement.ts [--seed N] [--tasks N] [--window N] [--seeds N]`,
    );
    process.exit(2);
  }
}
const { values } = args();

function int(name: string, text: string | undefined, min: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) {
    console.error(`--${name} must be an integer >= ${min}, got ${text}`);
    process.exit(2);
  }
  return n;
}

const seed = int('seed', values.seed, 0);
const tasks = int('tasks', values.tasks, 1);
const seeds = int('seeds', values.seeds, 0);

type Maker = (ctx: SimContext) => Policy;

const policies: Maker[] = [
  roundRobin(),
  random(),
  leastLoaded(),
  cacheAware(),
  leastLoadedJobs(),
  rendezvous(),
  vtnode({}, 'vtnode, capacity weights only', { measured: false }),
  vtnode(),
];

interface Row {
  policy: string;
  prefillRatio: number;
  hitRate: number;
  makespanRatio: number;
  maxMeanLoad: number;
  result: SimResult;
  extra: string;
}

function run(trace: Trace, makers: Maker[], window: number, seed: number): Row[] {
  const oracle = oraclePrefillTokens(trace);
  const ideal = idealMakespan(trace);
  return makers.map((make) => {
    let policy: Policy | undefined;
    const result = simulate(
      trace,
      (ctx) => {
        policy = make(ctx);
        return policy;
      },
      { window, seed },
    );
    const loads = result.perNode.map((n) => n.busyPerSlot);
    const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
    const reasons = (policy as { reasons?: Record<string, number> }).reasons;
    return {
      policy: result.policy,
      prefillRatio: result.prefillTokens / oracle,
      hitRate: result.hits / result.samples,
      makespanRatio: result.makespan / ideal,
      maxMeanLoad: Math.max(...loads) / mean,
      result,
      extra: reasons ? `warm ${reasons['warm']}, owner ${reasons['owner']}, spill ${reasons['spill']}` : '',
    };
  });
}

function table(rows: Row[]): string {
  const lines = [
    '| policy | prefill ÷ oracle | cache hit rate | makespan ÷ ideal | max/mean node load |',
    '| --- | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows)
    lines.push(
      `| ${r.policy} | ${r.prefillRatio.toFixed(2)} | ${(100 * r.hitRate).toFixed(1)}% | ${r.makespanRatio.toFixed(2)} | ${r.maxMeanLoad.toFixed(2)} |`,
    );
  return lines.join('\n');
}

const traces = [standardTrace(seed, tasks), skewedTrace(seed, tasks)];
const capacity = traces[0]!.nodes.reduce((a, n) => a + n.concurrency, 0);
const window = values.window === undefined ? 2 * capacity : int('window', values.window, 1);

console.log(`# Placement simulator (seed ${seed})\n`);
console.log(
  `Nodes: ${traces[0]!.nodes.map((n) => `${n.id} (speed ${n.speed}, ${n.concurrency} slots)`).join(', ')}.`,
);
console.log(
  `Cost model: prefill ${PREFILL_TOKENS_PER_S} tok/s and decode ${DECODE_TOKENS_PER_S} tok/s per request at speed 1; ` +
    `LRU cache of ${traces[0]!.cacheSlots} prompts per server; k = ${K}; ${window} tasks in flight; adverts every ${ADVERT_INTERVAL_S} s.\n`,
);

for (const trace of traces) {
  const rows = run(trace, policies, window, seed);
  console.log(`## ${trace.name}: ${trace.description}\n`);
  console.log(
    `oracle prefill ${(oraclePrefillTokens(trace) / 1e6).toFixed(2)}M tokens, ideal makespan ${idealMakespan(trace).toFixed(0)} s, ` +
      `oracle hit rate ${(100 * (1 - oraclePrefillTokens(trace) / trace.promptTokens / (trace.jobs.length * K))).toFixed(1)}%\n`,
  );
  console.log(table(rows));
  const v = rows.find((r) => r.policy === 'vtnode');
  if (v) console.log(`\nvtnode placements: ${v.extra}.`);
  console.log('');
}

console.log('## vtnode load slack ε (both traces)\n');
console.log(
  '| trace | ε | prefill ÷ oracle | cache hit rate | makespan ÷ ideal | max/mean node load | warm / owner / spill |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- |');
for (const trace of traces) {
  for (const epsilon of [0, 0.1, 0.25, 0.5, 1, 2]) {
    const [r] = run(trace, [vtnode({ epsilon }, `vtnode ε=${epsilon}`)], window, seed);
    console.log(
      `| ${trace.name} | ${epsilon} | ${r!.prefillRatio.toFixed(2)} | ${(100 * r!.hitRate).toFixed(1)}% | ${r!.makespanRatio.toFixed(2)} | ${r!.maxMeanLoad.toFixed(2)} | ${r!.extra.replace(/[a-z]+ /g, '').replaceAll(', ', ' / ')} |`,
    );
  }
}

{
  const trace = traces[0]!;
  const ideal = idealMakespan(trace);
  const at = (share: number) => Math.round(share * ideal);
  const scenarios: { name: string; faults: SimFault[] }[] = [
    { name: 'no faults', faults: [] },
    {
      name: 'studio-1 drops at 25 % of the ideal, rejoins (cold) at 50 %',
      faults: [{ node: 'studio-1', kind: 'disconnect', at: at(0.25), until: at(0.5) }],
    },
    {
      name: 'studio-2 drops at 30 % and rejoins at 60 %; max-1 drops at 40 % for good',
      faults: [
        { node: 'studio-2', kind: 'disconnect', at: at(0.3), until: at(0.6) },
        { node: 'max-1', kind: 'disconnect', at: at(0.4), until: Number.POSITIVE_INFINITY },
      ],
    },
    {
      name: 'pro refuses every job from 10 % to 60 % (model server failing)',
      faults: [{ node: 'pro', kind: 'refuse', at: at(0.1), until: at(0.6) }],
    },
  ];
  console.log(`\n## Faults (${trace.name} trace, vtnode; makespan against the fault-free ideal)\n`);
  console.log(
    '| scenario | reputation | makespan ÷ ideal | refusals | samples re-placed | distinct samples / planned | samples run |',
  );
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
  for (const scenario of scenarios) {
    for (const withReputation of [true, false]) {
      if (!withReputation && scenario.faults.length === 0) continue;
      const r = simulate(trace, vtnode({}, 'vtnode', { reputation: withReputation }), {
        window,
        seed,
        faults: scenario.faults,
      });
      console.log(
        `| ${scenario.name} | ${withReputation ? 'on' : 'off'} | ${(r.makespan / ideal).toFixed(2)} | ${r.refusals} | ${r.replacedSamples} | ${r.distinctSamples} / ${trace.jobs.length * K} | ${r.samples} |`,
      );
    }
  }
}

if (seeds > 0) {
  console.log(`\n## Means over seeds ${seed}–${seed + seeds - 1}\n`);
  console.log(
    '| policy | standard: prefill ÷ oracle | standard: makespan ÷ ideal | skewed: prefill ÷ oracle | skewed: makespan ÷ ideal |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: |');
  const sums = new Map<string, number[]>();
  for (let s = seed; s < seed + seeds; s++) {
    const [std, skew] = [standardTrace(s, tasks), skewedTrace(s, tasks)];
    const a = run(std, policies, window, s);
    const b = run(skew, policies, window, s);
    a.forEach((r, i) => {
      const acc = sums.get(r.policy) ?? [0, 0, 0, 0];
      acc[0]! += r.prefillRatio;
      acc[1]! += r.makespanRatio;
      acc[2]! += b[i]!.prefillRatio;
      acc[3]! += b[i]!.makespanRatio;
      sums.set(r.policy, acc);
    });
  }
  for (const [policy, acc] of sums)
    console.log(`| ${policy} | ${acc.map((v) => (v / seeds).toFixed(2)).join(' | ')} |`);
}
