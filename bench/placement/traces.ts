import { type Random, seededRandom } from '../../placement/seeded-random.ts';
import { sha256Hex } from '../../protocol/canonical.ts';
import { idealMakespan, type SimFault } from './sim.ts';

/** One simulated node: a model server plus its worker. */
export interface SimNodeSpec {
  /** Peer id (also the host name in tables). */
  id: string;
  /** Speed relative to the baseline node (prefill 1000 tok/s, decode 40 tok/s per request). */
  speed: number;
  /** Requests the server runs at once; also the jobs the worker runs at once (its advertised capacity). */
  concurrency: number;
  /** Workspace content ids the node holds. */
  workspaces: string[];
}

/** One job of the trace: k samples of one prompt. */
export interface SimJob {
  /** Unique id (a task id; repeated prompts get distinct ids). */
  id: string;
  /** Prompt fingerprint. */
  prompt: string;
  /** Workspace content id. */
  workspace: string;
  /** Output tokens of each of the k samples. */
  decodeTokens: number[];
}

export interface Trace {
  name: string;
  /** One-line description for the report. */
  description: string;
  nodes: SimNodeSpec[];
  jobs: SimJob[];
  /** Tokens in every prompt. */
  promptTokens: number;
  /** Prompts each server's cache holds (LRU). */
  cacheSlots: number;
  /** Nodes joining, leaving and pausing during the run (churn). */
  faults?: SimFault[];
}

export const PROMPT_TOKENS = 12_000;
export const CACHE_SLOTS = 4;
export const K = 8;

const id = (label: string) => `sha256:${sha256Hex(label)}`;
export const WORKSPACES = ['ws-hot', 'ws-warm', 'ws-small', 'ws-tiny'].map(id);

/** Six nodes of mixed speed: two Studios, two Max laptops, a Pro, an Air. */
function fleet(holdings: string[][] = everyNodeHoldsAll()): SimNodeSpec[] {
  const base = [
    { id: 'studio-1', speed: 1.5, concurrency: 4 },
    { id: 'studio-2', speed: 1.5, concurrency: 4 },
    { id: 'max-1', speed: 1.0, concurrency: 2 },
    { id: 'max-2', speed: 1.0, concurrency: 2 },
    { id: 'pro', speed: 0.7, concurrency: 2 },
    { id: 'air', speed: 0.4, concurrency: 1 },
  ];
  return base.map((b, i) => ({ ...b, workspaces: holdings[i]! }));
}

/** Output lengths: uniform 300–700 tokens (mean 500). */
function decodeLengths(rand: Random): number[] {
  return Array.from({ length: K }, () => 300 + Math.floor(rand() * 401));
}

function everyNodeHoldsAll(): string[][] {
  return Array.from({ length: 6 }, () => [...WORKSPACES]);
}

/** Tasks with distinct prompts over the four workspaces (the standard trace's jobs). */
function distinctJobs(seed: number, tasks: number): SimJob[] {
  const rand = seededRandom(seed);
  return Array.from({ length: tasks }, (_, i) => ({
    id: `task-${i}`,
    prompt: id(`standard-prompt-${i}`),
    workspace: WORKSPACES[i % WORKSPACES.length]!,
    decodeTokens: decodeLengths(rand),
  }));
}

/** 500 tasks × k = 8, every prompt distinct, four workspaces every node holds. */
export function standardTrace(seed: number, tasks = 500): Trace {
  return {
    name: 'standard',
    description: `${tasks} tasks × k=${K}, distinct ${PROMPT_TOKENS / 1000}k-token prompts, 4 workspaces on every node`,
    nodes: fleet(),
    jobs: distinctJobs(seed, tasks),
    promptTokens: PROMPT_TOKENS,
    cacheSlots: CACHE_SLOTS,
  };
}

/**
 * The standard trace's tasks on six equal nodes (speed 1, 3 slots: 18 slot-speeds, about the mixed
 * fleet's 17.8), where measured-throughput weights have nothing to find.
 */
export function homogeneousTrace(seed: number, tasks = 500): Trace {
  return {
    name: 'homogeneous',
    description: `${tasks} tasks × k=${K}, distinct prompts, six equal nodes (speed 1, 3 slots)`,
    nodes: Array.from({ length: 6 }, (_, i) => ({
      id: `node-${i + 1}`,
      speed: 1,
      concurrency: 3,
      workspaces: [...WORKSPACES],
    })),
    jobs: distinctJobs(seed, tasks),
    promptTokens: PROMPT_TOKENS,
    cacheSlots: CACHE_SLOTS,
  };
}

/** Campaigns of the repeated trace: (model, temperature) of each pass over the same prompts. */
const CAMPAIGNS = [
  { model: 'a', temperature: 0.2 },
  { model: 'a', temperature: 0.8 },
  { model: 'b', temperature: 0.2 },
  { model: 'b', temperature: 0.8 },
  { model: 'a', temperature: 0.2, rescore: true },
];
/** Prompts by which each campaign trails the one before (they overlap in time, as sweeps do). */
const CAMPAIGN_LAG = 6;

/**
 * Five campaigns over the same tasks/5 prompts: two models × two temperatures, then a rescore round
 * with the first model. The cache key is (prompt, model), so a prompt comes back three times for
 * model a and twice for model b. Each campaign trails the previous by 6 prompts (with a seeded swap
 * of neighbours), so a prompt recurs a few dozen tasks later, while a node that prefilled it may
 * still hold it: the case where gossiped warm caches should pay.
 */
export function repeatedTrace(seed: number, tasks = 500): Trace {
  const rand = seededRandom(seed);
  const prompts = Math.max(1, Math.floor(tasks / CAMPAIGNS.length));
  const slots: { at: number; job: SimJob }[] = [];
  CAMPAIGNS.forEach((c, ci) => {
    for (let p = 0; p < prompts; p++) {
      slots.push({
        // Position in time: campaign lag plus a jitter that swaps neighbours now and then.
        at: p + ci * CAMPAIGN_LAG + rand() * 1.5,
        job: {
          id: `c${ci}-${c.model}-t${c.temperature}${c.rescore ? '-rescore' : ''}-${p}`,
          prompt: id(`repeated-${c.model}-${p}`),
          workspace: WORKSPACES[p % WORKSPACES.length]!,
          decodeTokens: decodeLengths(rand),
        },
      });
    }
  });
  slots.sort((a, b) => a.at - b.at);
  return {
    name: 'repeated',
    description: `${prompts} prompts × 5 campaigns (2 models × 2 temperatures + a rescore), k=${K}, campaigns ${CAMPAIGN_LAG} prompts apart`,
    nodes: fleet(),
    jobs: slots.map((s) => s.job),
    promptTokens: PROMPT_TOKENS,
    cacheSlots: CACHE_SLOTS,
  };
}

/**
 * The standard tasks on the mixed fleet while the laptops come and go (times are shares of the
 * fault-free ideal makespan): max-2 joins at 20 % and leaves for good at 75 %; the Pro leaves at
 * 30 % and rejoins (cold) at 65 %; the Air runs on battery (takes no new work) from 10 % to 80 %;
 * max-1 is on battery from 40 % to 70 %. The Studios stay.
 */
export function churnTrace(seed: number, tasks = 500): Trace {
  const base: Trace = {
    name: 'churn',
    description: `${tasks} tasks × k=${K}, distinct prompts; laptops join, leave and go on battery`,
    nodes: fleet(),
    jobs: distinctJobs(seed, tasks),
    promptTokens: PROMPT_TOKENS,
    cacheSlots: CACHE_SLOTS,
  };
  const ideal = idealMakespan(base);
  const at = (share: number) => Math.round(share * ideal);
  const faults: SimFault[] = [
    { node: 'max-2', kind: 'disconnect', at: 0, until: at(0.2) },
    { node: 'max-2', kind: 'disconnect', at: at(0.75), until: Number.POSITIVE_INFINITY },
    { node: 'pro', kind: 'disconnect', at: at(0.3), until: at(0.65) },
    { node: 'air', kind: 'pause', at: at(0.1), until: at(0.8) },
    { node: 'max-1', kind: 'pause', at: at(0.4), until: at(0.7) },
  ];
  return { ...base, faults };
}

/** Zipf draw over ranks 0..n-1 with exponent s. */
function zipf(rand: Random, n: number, s: number): number {
  let total = 0;
  for (let r = 1; r <= n; r++) total += 1 / r ** s;
  let x = rand() * total;
  for (let r = 1; r <= n; r++) {
    x -= 1 / r ** s;
    if (x <= 0) return r - 1;
  }
  return n - 1;
}

/**
 * 500 jobs × k = 8 over hot workspaces and repeated prompts: workspaces take 55/25/12/8% of the
 * jobs; within a workspace prompts follow Zipf(1.1) over a pool (180 distinct prompts overall), so hot
 * prompts come back many times (a re-run campaign, more samples for hard tasks). The hot workspace is
 * held by four nodes, the second by three, the others by all six.
 */
export function skewedTrace(seed: number, jobsCount = 500): Trace {
  const rand = seededRandom(seed);
  const shares = [0.55, 0.25, 0.12, 0.08];
  const pools = [90, 50, 25, 15];
  const jobs: SimJob[] = [];
  for (let i = 0; i < jobsCount; i++) {
    let x = rand();
    let w = 0;
    while (w < shares.length - 1 && x >= shares[w]!) x -= shares[w++]!;
    const p = zipf(rand, pools[w]!, 1.1);
    jobs.push({
      id: `job-${i}`,
      prompt: id(`skewed-${w}-${p}`),
      workspace: WORKSPACES[w]!,
      decodeTokens: decodeLengths(rand),
    });
  }
  const [hot, warm, small, tiny] = WORKSPACES as [string, string, string, string];
  return {
    name: 'skewed',
    description: `${jobsCount} jobs × k=${K}, hot workspaces (55/25/12/8%) held by 4/3/6/6 nodes, Zipf(1.1)-repeated prompts`,
    nodes: fleet([
      [hot, small, tiny],
      [warm, small, tiny],
      [hot, small, tiny],
      [hot, warm, small, tiny],
      [warm, small, tiny],
      [hot, small, tiny],
    ]),
    jobs,
    promptTokens: PROMPT_TOKENS,
    cacheSlots: CACHE_SLOTS,
  };
}

/** Every trace of the race, by name, built from (seed, tasks). */
export const TRACES: Record<string, (seed: number, tasks: number) => Trace> = {
  standard: standardTrace,
  skewed: skewedTrace,
  homogeneous: homogeneousTrace,
  repeated: repeatedTrace,
  churn: churnTrace,
};
