/**
 * Placement simulator: races routing policies on five traces (standard, skewed, homogeneous,
 * repeated campaigns, laptop churn) against the oracle (fewest prefills) and the ideal makespan, and
 * vtnode against the best alternative. Deterministic for a given seed.
 *
 *   npx node bench/placement.ts [--seed N] [--tasks N] [--window N] [--seeds N] [--traces a,b] [--json]
 *
 * --json prints only { "traces": { TRACE: { POLICY: { "prefillRatio", "makespanRatio" } } } }.
 */
import { parseArgs } from 'node:util';
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
import { K, standardTrace, TRACES, type Trace } from './placement/traces.ts';

const USAGE =
  'usage: npx node bench/placement.ts [--seed N] [--tasks N] [--window N] [--seeds N] [--traces a,b] [--json]';

function args() {
  try {
    return parseArgs({
      options: {
        seed: { type: 'string', default: '1' },
        tasks: { type: 'string', default: '500' },
        window: { type: 'string' },
        seeds: { type: 'string', default: '5' },
        traces: { type: 'string', default: Object.keys(TRACES).join(',') },
        json: { type: 'boolean', default: false },
      },
    });
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
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

const TraceNames = z.array(z.enum(Object.keys(TRACES) as [string, ...string[]])).min(1);
function traceNames(text: string): string[] {
  const parsed = TraceNames.safeParse(text.split(',').map((s) => s.trim()));
  if (!parsed.success) {
    console.error(`--traces must list some of ${Object.keys(TRACES).join(', ')}, got ${text}`);
    process.exit(2);
  }
  return parsed.data;
}

const seed = int('seed', values.seed, 0);
const tasks = int('tasks', values.tasks, 1);
const seeds = int('seeds', values.seeds, 0);
const names = traceNames(values.traces);
const json = values.json;

type Maker = (ctx: SimContext) => Policy;

/** Every policy in the race; vtnode's own rows are named `vtnode…`, the rest are the alternatives. */
const policies: Maker[] = [
  roundRobin(),
  random(),
  leastLoaded(),
  cacheAware(),
  leastLoadedJobs(),
  rendezvous(),
  cacheAwareRequests(),
  dynamo(),
  chwbl(),
  pullQueue(),
  vtnode({}, 'vtnode, capacity weights only', { measured: false }),
  vtnode(),
];
const isAlternative = (policy: string) => !policy.startsWith('vtnode');

interface Row {
  policy: string;
  prefillRatio: number;
  hitRate: number;
  makespanRatio: number;
  maxMeanLoad: number;
  result: SimResult;
  extra: string;
}

/** Every run shares in-flight prefills on the servers: the alternatives' best light. */
function run(trace: Trace, makers: Maker[], window: number, seed: number, faults: SimFault[] = []): Row[] {
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
      { window, seed, faults, sharePrefill: true },
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

/** vtnode against the best alternative of one trace: lowest makespan, and separately lowest prefill. */
interface Headline {
  makespan: number;
  bestMakespan: Row;
  prefill: number;
  bestPrefill: Row;
}

function headline(rows: Row[]): Headline {
  const v = rows.find((r) => r.policy === 'vtnode')!;
  const alternatives = rows.filter((r) => isAlternative(r.policy));
  const bestMakespan = alternatives.reduce((a, b) => (b.makespanRatio < a.makespanRatio ? b : a));
  const bestPrefill = alternatives.reduce((a, b) => (b.prefillRatio < a.prefillRatio ? b : a));
  return {
    makespan: v.makespanRatio / bestMakespan.makespanRatio,
    bestMakespan,
    prefill: v.prefillRatio / bestPrefill.prefillRatio,
    bestPrefill,
  };
}

/** Issue 14's goals: homogeneous within 1.02× the best makespan; elsewhere ≤ 0.85× makespan and ≤ 1.0× prefill. */
function goal(trace: string, h: Headline): string {
  if (trace === 'homogeneous') return h.makespan <= 1.02 ? 'met (≤ 1.02×)' : 'missed (> 1.02×)';
  const parts = [
    h.makespan <= 0.85 ? 'makespan met' : 'makespan missed',
    h.prefill <= 1.0 + 1e-9 ? 'prefill met' : 'prefill missed',
  ];
  return parts.join(', ');
}

const traces = names.map((name) => TRACES[name]!(seed, tasks));
const capacity = standardTrace(seed, 1).nodes.reduce((a, n) => a + n.concurrency, 0);
const window = values.window === undefined ? 2 * capacity : int('window', values.window, 1);
const results = new Map(traces.map((trace) => [trace.name, run(trace, policies, window, seed)]));

if (json) {
  const out = {
    traces: Object.fromEntries(
      [...results].map(([name, rows]) => [
        name,
        Object.fromEntries(
          rows.map((r) => [r.policy, { prefillRatio: r.prefillRatio, makespanRatio: r.makespanRatio }]),
        ),
      ]),
    ),
  };
  console.log(JSON.stringify(out, null, 2));
  process.exit(0);
}

console.log(`# Placement simulator (seed ${seed})\n`);
console.log(
  `Mixed fleet: ${traces[0]!.nodes.map((n) => `${n.id} (speed ${n.speed}, ${n.concurrency} slots)`).join(', ')}.`,
);
console.log(
  `Cost model: prefill ${PREFILL_TOKENS_PER_S} tok/s and decode ${DECODE_TOKENS_PER_S} tok/s per request at speed 1; ` +
    `LRU cache of ${traces[0]!.cacheSlots} prompts per server, in-flight prefill sharing on; k = ${K}; ${window} tasks in flight; adverts every ${ADVERT_INTERVAL_S} s.\n`,
);

for (const trace of traces) {
  const rows = results.get(trace.name)!;
  console.log(`## ${trace.name}: ${trace.description}\n`);
  console.log(
    `oracle prefill ${(oraclePrefillTokens(trace) / 1e6).toFixed(2)}M tokens, ideal makespan ${idealMakespan(trace).toFixed(0)} s` +
      `${trace.faults ? ' (fault-free)' : ''}, oracle hit rate ${(100 * (1 - oraclePrefillTokens(trace) / trace.promptTokens / (trace.jobs.length * K))).toFixed(1)}%\n`,
  );
  console.log(table(rows));
  const v = rows.find((r) => r.policy === 'vtnode');
  if (v) console.log(`\nvtnode placements: ${v.extra}.`);
  console.log('');
}

console.log('## vtnode against the best alternative\n');
console.log(
  '| trace | makespan: vtnode ÷ best | best makespan (÷ ideal) | prefill: vtnode ÷ best | best prefill (÷ oracle) | goal |',
);
console.log('| --- | ---: | --- | ---: | --- | --- |');
for (const [name, rows] of results) {
  const h = headline(rows);
  console.log(
    `| ${name} | ${h.makespan.toFixed(2)} | ${h.bestMakespan.policy} (${h.bestMakespan.makespanRatio.toFixed(2)}) | ${h.prefill.toFixed(3)} | ${h.bestPrefill.policy} (${h.bestPrefill.prefillRatio.toFixed(2)}) | ${goal(name, h)} |`,
  );
}

epsilonSweep(traces.filter((t) => t.name === 'standard' || t.name === 'skewed'));
faultsTable();
if (seeds > 0) meansOverSeeds();

function epsilonSweep(swept: Trace[]) {
  if (swept.length === 0) return;
  console.log(`\n## vtnode load slack ε (${swept.map((t) => t.name).join(', ')})\n`);
  console.log(
    '| trace | ε | prefill ÷ oracle | cache hit rate | makespan ÷ ideal | max/mean node load | warm / owner / spill |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- |');
  for (const trace of swept) {
    for (const epsilon of [0, 0.1, 0.25, 0.5, 1, 2]) {
      const [r] = run(trace, [vtnode({ epsilon }, `vtnode ε=${epsilon}`)], window, seed);
      console.log(
        `| ${trace.name} | ${epsilon} | ${r!.prefillRatio.toFixed(2)} | ${(100 * r!.hitRate).toFixed(1)}% | ${r!.makespanRatio.toFixed(2)} | ${r!.maxMeanLoad.toFixed(2)} | ${r!.extra.replace(/[a-z]+ /g, '').replaceAll(', ', ' / ')} |`,
      );
    }
  }
}

function faultsTable() {
  const trace = standardTrace(seed, tasks);
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
      const [row] = run(
        trace,
        [vtnode({}, 'vtnode', { reputation: withReputation })],
        window,
        seed,
        scenario.faults,
      );
      const r = row!.result;
      console.log(
        `| ${scenario.name} | ${withReputation ? 'on' : 'off'} | ${(r.makespan / ideal).toFixed(2)} | ${r.refusals} | ${r.replacedSamples} | ${r.distinctSamples} / ${trace.jobs.length * K} | ${r.samples} |`,
      );
    }
  }
}

/** Means over seeds of vtnode ÷ best alternative, per trace (the best may differ by seed). */
function meansOverSeeds() {
  console.log(`\n## vtnode ÷ best alternative, means over seeds ${seed}–${seed + seeds - 1}\n`);
  console.log('| trace | makespan: vtnode ÷ best | prefill: vtnode ÷ best | best on makespan (seeds) |');
  console.log('| --- | ---: | ---: | --- |');
  for (const name of names) {
    let makespan = 0;
    let prefill = 0;
    const winners = new Map<string, number>();
    for (let s = seed; s < seed + seeds; s++) {
      const h = headline(run(TRACES[name]!(s, tasks), policies, window, s));
      makespan += h.makespan;
      prefill += h.prefill;
      winners.set(h.bestMakespan.policy, (winners.get(h.bestMakespan.policy) ?? 0) + 1);
    }
    const best = [...winners].map(([p, n]) => `${p} ×${n}`).join(', ');
    console.log(`| ${name} | ${(makespan / seeds).toFixed(2)} | ${(prefill / seeds).toFixed(2)} | ${best} |`);
  }
}
