import { createLeaseBook } from '../../placement/lease-book.ts';
import { createPlacer, type PlacerOptions } from '../../placement/placer.ts';
import { createReputation } from '../../placement/reputation.ts';
import { createThroughput } from '../../placement/throughput.ts';
import { MODEL, type Policy, type SimContext, type SimNode } from './sim.ts';
import type { SimJob } from './traces.ts';

/** Round-robin per sample: the k samples of a task go to successive nodes. */
export function roundRobin(): (ctx: SimContext) => Policy {
  return () => {
    let next = 0;
    return {
      kind: 'sample',
      name: 'round-robin (per sample)',
      route: (_job, _s, eligible) => eligible[next++ % eligible.length]!,
    };
  };
}

/** Uniformly random node per sample (seeded). */
export function random(): (ctx: SimContext) => Policy {
  return (ctx) => ({
    kind: 'sample',
    name: 'random (per sample)',
    route: (_job, _s, eligible) => eligible[Math.floor(ctx.rand() * eligible.length)]!,
  });
}

/** Fewest requests in flight per server slot, per sample. */
export function leastLoaded(): (ctx: SimContext) => Policy {
  return () => ({
    kind: 'sample',
    name: 'least-loaded (per sample)',
    route: (_job, _s, eligible) => minBy(eligible, (n) => n.inFlight / n.spec.concurrency),
  });
}

/** Fewest jobs queued + running per job slot, per job (all k samples on one node, no affinity). */
export function leastLoadedJobs(): (ctx: SimContext) => Policy {
  return () => ({
    kind: 'job',
    name: 'least-loaded (per job)',
    place: (_job, eligible) =>
      minBy(eligible, (n) => (n.jobQueue.length + n.running.size) / n.spec.concurrency),
  });
}

export interface CacheAwareOptions {
  /** Match rate above which a request follows its cached prefix (SGLang default 0.3, here 0.3). */
  cacheThreshold: number;
  /** Load gap (requests) above which the router balances instead (SGLang balance_abs_threshold). */
  balanceAbs: number;
  /** Load ratio above which the router balances instead (SGLang balance_rel_threshold). */
  balanceRel: number;
  /** Characters each worker's approximate tree keeps before LRU eviction (SGLang max_tree_size 2^24). */
  maxTreeChars: number;
  /** Seconds between evictions (SGLang eviction_interval 60). */
  evictionIntervalS: number;
  /** Characters per prompt token (about 4 for code). */
  charsPerToken: number;
}

/**
 * SGLang-router-style cache-aware routing, per sample: the router keeps an approximate radix tree
 * per worker of the prompts it sent there (it never sees the server's real cache). When loads are
 * imbalanced (max − min > abs and max > rel × min) it sends to the least-loaded worker; otherwise to
 * the worker with the longest prefix match if the match rate exceeds the threshold, else to the
 * worker with the smallest tree. Prompts here are distinct beyond a shared system prefix far below
 * the 0.3 threshold, so a prompt matches fully (1.0) or not at all (below threshold).
 */
export function cacheAware(options: Partial<CacheAwareOptions> = {}): (ctx: SimContext) => Policy {
  return (ctx) => {
    const choose = cacheAwareChooser(ctx, options);
    return {
      kind: 'sample',
      name: 'cache-aware (SGLang-style)',
      route: (job, _s, eligible, now) => choose(job, eligible, now, (n) => n.inFlight),
    };
  };
}

/**
 * SGLang-style thresholds for Macs of 1–4 slots. The default absolute gap of 64 requests is about 33
 * minutes of backlog on an Air; here a gap of 2 n = k requests (16 samples, a few minutes on a 2-slot
 * laptop) already counts as imbalance. The relative threshold stays 1.5 (a bench sweep of 1, 2, 4,
 * 8 and 64 requests found 2 best or tied on every trace).
 */
export const SGLANG_MAC: Partial<CacheAwareOptions> = { balanceAbs: 2, balanceRel: 1.5 };

/**
 * The same SGLang-style cache-aware logic, one request with n = k per task, load counted in requests
 * in flight (as sgl-router counts them), thresholds tuned for Macs (SGLANG_MAC).
 */
export function cacheAwareRequests(
  options: Partial<CacheAwareOptions> = SGLANG_MAC,
): (ctx: SimContext) => Policy {
  return (ctx) => {
    const choose = cacheAwareChooser(ctx, options);
    return {
      kind: 'request',
      name: 'SGLang-style, n = k',
      route: (job, _samples, eligible, now) => choose(job, eligible, now, (n) => n.requests.size),
    };
  };
}

type Chooser = (job: SimJob, eligible: SimNode[], now: number, load: (n: SimNode) => number) => SimNode;

/** The cache-aware decision, shared by the per-sample and n = k forms. */
function cacheAwareChooser(ctx: SimContext, options: Partial<CacheAwareOptions>): Chooser {
  const o: CacheAwareOptions = {
    cacheThreshold: 0.3,
    balanceAbs: 64,
    balanceRel: 1.5,
    maxTreeChars: 2 ** 24,
    evictionIntervalS: 60,
    charsPerToken: 4,
    ...options,
  };
  const trees = new Map<SimNode, { entries: Map<string, number>; chars: number }>(
    ctx.nodes.map((n) => [n, { entries: new Map(), chars: 0 }]),
  );
  const promptChars = ctx.trace.promptTokens * o.charsPerToken;
  let lastEviction = 0;
  const evict = (now: number) => {
    if (now - lastEviction < o.evictionIntervalS) return;
    lastEviction = now;
    for (const tree of trees.values()) {
      if (tree.chars <= o.maxTreeChars) continue;
      const byAge = [...tree.entries].sort((a, b) => a[1] - b[1]);
      for (const [prompt] of byAge) {
        if (tree.chars <= o.maxTreeChars) break;
        tree.entries.delete(prompt);
        tree.chars -= promptChars;
      }
    }
  };
  const insert = (node: SimNode, prompt: string, now: number) => {
    const tree = trees.get(node)!;
    if (!tree.entries.has(prompt)) tree.chars += promptChars;
    tree.entries.set(prompt, now);
  };
  return (job, eligible, now, load) => {
    evict(now);
    const loads = eligible.map(load);
    const max = Math.max(...loads);
    const min = Math.min(...loads);
    let chosen: SimNode;
    if (max - min > o.balanceAbs && max > o.balanceRel * min) chosen = minBy(eligible, load);
    else {
      const matching = eligible.find((n) => trees.get(n)!.entries.has(job.prompt));
      const matchRate = matching ? 1 : 0;
      chosen =
        matching && matchRate > o.cacheThreshold ? matching : minBy(eligible, (n) => trees.get(n)!.chars);
    }
    insert(chosen, job.prompt, now);
    return chosen;
  };
}

export interface DynamoOptions {
  /** Weight of prefill blocks against decode blocks (Dynamo's default 1; a sweep of 0.25–4 found 1 within 0.08 of the best). */
  overlapWeight: number;
  /** Tokens per KV block (Dynamo kv-cache-block-size; 16 is vLLM's default). */
  blockSize: number;
  /** Output tokens the router expects per sample (it cannot know them; the trace's mean). */
  expectedOutputTokens: number;
}

/**
 * Dynamo-style KV-aware cost router, one request with n = k per task. Per worker, cost =
 * overlapWeight × potential prefill blocks (the worker's pending prefills plus this prompt's blocks not
 * in its cache) + potential active blocks (blocks of its requests in flight plus this one's: the
 * prompt once, shared by the k streams, and each stream's output). Lowest cost wins (temperature 0).
 * Its cache view is exact: Dynamo workers publish KV events, here the server's real LRU.
 */
export function dynamo(options: Partial<DynamoOptions> = {}): (ctx: SimContext) => Policy {
  const o: DynamoOptions = { overlapWeight: 1, blockSize: 16, expectedOutputTokens: 500, ...options };
  return (ctx) => {
    const promptBlocks = Math.ceil(ctx.trace.promptTokens / o.blockSize);
    const outputBlocks = Math.ceil(o.expectedOutputTokens / o.blockSize);
    const activeBlocks = (n: SimNode) =>
      [...n.requests].reduce(
        (a, r) => a + promptBlocks + (r.samples.length - r.returned.size) * outputBlocks,
        0,
      );
    const pendingPrefill = (n: SimNode) =>
      [...n.requests].filter((r) => !r.fanned && !n.lru.includes(r.job.prompt)).length * promptBlocks;
    return {
      kind: 'request',
      name: 'Dynamo-style, n = k',
      route(job, samples, eligible) {
        return minBy(eligible, (n) => {
          const newPrefill = n.lru.includes(job.prompt) ? 0 : promptBlocks;
          const prefill = pendingPrefill(n) + newPrefill;
          const active = activeBlocks(n) + promptBlocks + samples.length * outputBlocks;
          return o.overlapWeight * prefill + active;
        });
      },
    };
  };
}

export interface ChwblOptions {
  /** Load bound factor: a node may hold at most ⌈factor × mean load⌉ requests (KubeAI's default 1.25; here 1.1). */
  loadFactor: number;
  /** Points per node on the ring (KubeAI replication 256). */
  replication: number;
}

/**
 * KubeAI-style prefix hashing with bounded loads (CHWBL), one request with n = k per task: hash the
 * prompt, walk the ring from there, take the first eligible node whose requests in flight + 1 stay
 * within ⌈loadFactor × (total + 1) ÷ nodes⌉. Speed-blind, as KubeAI is.
 */
export function chwbl(options: Partial<ChwblOptions> = {}): (ctx: SimContext) => Policy {
  // 1.1, not KubeAI's 1.25: with a few requests per Mac the bound must bite early (a sweep of 1.1,
  // 1.25, 1.5 and 2 found 1.1 best on every trace).
  const o: ChwblOptions = { loadFactor: 1.1, replication: 256, ...options };
  return (ctx) => {
    const ring = ctx.nodes
      .flatMap((node) =>
        Array.from({ length: o.replication }, (_, i) => ({ h: fnv1a(`${node.spec.id}#${i}`), node })),
      )
      .sort((a, b) => a.h - b.h);
    return {
      kind: 'request',
      name: 'bounded-load hash (KubeAI-style), n = k',
      route(job, _samples, eligible) {
        const allowed = new Set(eligible);
        const total = eligible.reduce((a, n) => a + n.requests.size, 0);
        const cap = Math.ceil((o.loadFactor * (total + 1)) / eligible.length);
        const h = fnv1a(job.prompt);
        let start = ring.findIndex((p) => p.h >= h);
        if (start < 0) start = 0;
        for (let i = 0; i < ring.length; i++) {
          const { node } = ring[(start + i) % ring.length]!;
          if (allowed.has(node) && node.requests.size + 1 <= cap) return node;
        }
        return minBy(eligible, (n) => n.requests.size);
      },
    };
  };
}

/** 32-bit FNV-1a: a fast, stable hash for the ring. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** A central FIFO: a node takes the next task only when a job slot frees (warm, then fan out). */
export function pullQueue(): (ctx: SimContext) => Policy {
  return () => ({ kind: 'pull', name: 'pull queue (per task)' });
}

/** Weighted rendezvous hashing of (prompt, model) with no load bound and no warm affinity (the real placer, ε = ∞). */
export function rendezvous(): (ctx: SimContext) => Policy {
  return vtnodePolicy(
    'rendezvous (no load bound)',
    { epsilon: Number.POSITIVE_INFINITY, warmAffinity: false },
    { measured: false, reputation: false },
  );
}

/**
 * vtnode's placer (placement/placer.ts) fed by the simulated adverts, with the real lease book for
 * outstanding jobs and re-placement, and by default the real reputation book (refusals and
 * disconnects cool a node down) and weights from the real throughput meter, fed by each result's
 * usage and latency.
 */
export function vtnode(
  options: PlacerOptions = {},
  name = 'vtnode',
  extras: Partial<VtnodeExtras> = {},
): (ctx: SimContext) => Policy {
  return vtnodePolicy(name, options, { measured: true, reputation: true, ...extras });
}

/** What the vtnode policy does beyond the placer's options. */
interface VtnodeExtras {
  /** Weights from the throughput meter (else advertised capacity). */
  measured: boolean;
  /** Reputation book: refusals and disconnects cool nodes down. */
  reputation: boolean;
}

function vtnodePolicy(
  name: string,
  options: PlacerOptions,
  extras: VtnodeExtras,
): (ctx: SimContext) => Policy {
  return (ctx) => {
    const throughput = createThroughput();
    const reputation = extras.reputation ? createReputation() : undefined;
    const placer = createPlacer({
      ...(extras.measured ? { weight: throughput.weight } : {}),
      ...(reputation ? { reputation } : {}),
      ...options,
    });
    const book = createLeaseBook({ maxAttempts: 1000 });
    /** Task id → its active job id. */
    const jobIds = new Map<string, string>();
    const byId = new Map(ctx.nodes.map((n) => [n.spec.id, n]));
    const reasons = { warm: 0, owner: 0, spill: 0, fetching: 0 };
    const ms = (now: number) => Math.round(now * 1000);
    const policy: Policy & { reasons: typeof reasons } = {
      kind: 'job',
      name,
      reasons,
      place(job, _eligible, now, samples) {
        const placement = placer.place(
          {
            task: { id: job.id, promptFingerprint: job.prompt, workspace: { id: job.workspace } },
            model: MODEL,
            exclude: book.refusedBy(job.id, MODEL),
          },
          ctx.view.nodes(),
          ms(now),
          book.outstanding(),
        );
        if (!placement.ok) throw new Error(`${name}: ${placement.message}`);
        reasons[placement.reason]++;
        book.add(job.id, MODEL, job.decodeTokens.keys());
        const lease = book.lease(job.id, MODEL, placement.peerId, ms(now), ms(now) + 3_600_000);
        if (!lease) throw new Error(`${name}: could not lease ${job.id}`);
        // The lease book must hand out exactly the samples the simulator still needs.
        if (lease.samples.join() !== samples.join())
          throw new Error(
            `${name}: leased ${lease.samples.join()} for ${job.id}, expected ${samples.join()}`,
          );
        jobIds.set(job.id, lease.jobId);
        return byId.get(placement.peerId)!;
      },
      refused(node, job, now) {
        book.release(jobIds.get(job.id)!, 'refused');
        reputation?.failure(node.spec.id, ms(now));
      },
      disconnected(node, now) {
        const released = book.disconnect(node.spec.id);
        if (released.length > 0) reputation?.failure(node.spec.id, ms(now));
        return released.map((r) => ({ jobId: r.taskId, samples: r.samples }));
      },
      returned(node, job, sample, _now, timing) {
        throughput.record(node.spec.id, MODEL, timing);
        const outcome = book.result(jobIds.get(job.id)!, sample);
        if (outcome.status !== 'accepted')
          throw new Error(`${name}: sample ${job.id}/${sample} ${outcome.status}`);
      },
      finished(node, job, now) {
        if (book.job(jobIds.get(job.id)!))
          throw new Error(`${name}: lease of ${job.id} still open after its last sample`);
        reputation?.success(node.spec.id, ms(now));
      },
    };
    return policy;
  };
}

function minBy<T>(items: readonly T[], key: (t: T) => number): T {
  let best = items[0] as T;
  let bestKey = key(best);
  for (const item of items.slice(1)) {
    const k = key(item);
    if (k < bestKey) {
      best = item;
      bestKey = k;
    }
  }
  return best;
}
