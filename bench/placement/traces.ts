import { type Random, seededRandom } from '../../placement/seeded-random.ts';
import { sha256Hex } from '../../protocol/canonical.ts';

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
}

export const PROMPT_TOKENS = 12_000;
export const CACHE_SLOTS = 4;
export const K = 8;

const id = (label: string) => `sha256:${sha256Hex(label)}`;
export const WORKSPACES = ['ws-hot', 'ws-warm', 'ws-small', 'ws-tiny'].map(id);

/** Six nodes of mixed speed: two Studios, two Max laptops, a Pro, an Air. */
function fleet(holdings: string[][]): SimNodeSpec[] {
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

/** 500 tasks × k = 8, every prompt distinct, four workspaces every node holds. */
export function standardTrace(seed: number, tasks = 500): Trace {
  const rand = seededRandom(seed);
  const jobs: SimJob[] = Array.from({ length: tasks }, (_, i) => ({
    id: `task-${i}`,
    prompt: id(`standard-prompt-${i}`),
    workspace: WORKSPACES[i % WORKSPACES.length]!,
    decodeTokens: decodeLengths(rand),
  }));
  return {
    name: 'standard',
    description: `${tasks} tasks × k=${K}, distinct ${PROMPT_TOKENS / 1000}k-token prompts, 4 workspaces on every node`,
    nodes: fleet(Array.from({ length: 6 }, () => [...WORKSPACES])),
    jobs,
    promptTokens: PROMPT_TOKENS,
    cacheSlots: CACHE_SLOTS,
  };
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
