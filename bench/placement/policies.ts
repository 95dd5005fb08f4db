import { createLeaseBook } from '../../placement/lease-book.ts';
import { createPlacer, type PlacerOptions } from '../../placement/placer.ts';
import { createReputation } from '../../placement/reputation.ts';
import { createThroughput } from '../../placement/throughput.ts';
import { MODEL, type Policy, type SimContext, type SimNode } from './sim.ts';

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
  const o: CacheAwareOptions = {
    cacheThreshold: 0.3,
    balanceAbs: 64,
    balanceRel: 1.5,
    maxTreeChars: 2 ** 24,
    evictionIntervalS: 60,
    charsPerToken: 4,
    ...options,
  };
  return (ctx) => {
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
    return {
      kind: 'sample',
      name: 'cache-aware (SGLang-style)',
      route(job, _s, eligible, now) {
        evict(now);
        const loads = eligible.map((n) => n.inFlight);
        const max = Math.max(...loads);
        const min = Math.min(...loads);
        let chosen: SimNode;
        if (max - min > o.balanceAbs && max > o.balanceRel * min) chosen = minBy(eligible, (n) => n.inFlight);
        else {
          const matching = eligible.find((n) => trees.get(n)!.entries.has(job.prompt));
          const matchRate = matching ? 1 : 0;
          chosen =
            matching && matchRate > o.cacheThreshold ? matching : minBy(eligible, (n) => trees.get(n)!.chars);
        }
        insert(chosen, job.prompt, now);
        return chosen;
      },
    };
  };
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
