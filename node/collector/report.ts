import { type Resolution, resolveAll } from './claims.ts';
import { passAtK } from './passk.ts';
import type { AuditState, BodyState, StoredSample } from './store.ts';

/** One model's line of the eval table (seed §9.2). */
export interface ModelReport {
  model: string;
  /** Tasks with at least one sample. */
  tasks: number;
  /** Scored samples (one per sample id). */
  samples: number;
  /** Mean over tasks of c/n. */
  pass1: number;
  /** Mean over tasks with n ≥ k of the unbiased pass@k; null when no task has k samples. */
  passk: number | null;
  k: number;
  /** Tasks pass@k was averaged over (n ≥ k). */
  passkTasks: number;
  meanReward: number;
  /** Samples whose body was fetched (generation statistics are over these). */
  bodies: number;
  /** Share of bodies whose generation hit the length limit. */
  truncationRate: number | null;
  /** Mean completion tokens per second. */
  tokensPerSecond: number | null;
  /** Share of bodies whose prompt was warm in the model server's cache (as \`vtnode run\` counts cache hits). */
  cacheHitRate: number | null;
  /** Cached prompt tokens over all prompt tokens, over servers that report cached tokens. */
  cachedTokenRate: number | null;
  /** Claims whose reward an audit contradicted (the claim drops out; a sample every claim of which failed counts with the audited reward). */
  auditFailures: number;
  /** Sample ids left out of pass@k: their origins claim different rewards and no audit settled it. */
  disputed: number;
}

/** A sample id whose claims disagree on the reward (or task, model, split): left out of pass@k. */
export interface DisputedSample {
  sampleId: string;
  /** Every claim, ordered by origin. */
  claims: {
    origin: string;
    seq: number;
    taskId: string;
    model: string;
    reward: number;
    bodyState: BodyState;
    audit: AuditState;
  }[];
}

export interface Report {
  split: 'train' | 'eval' | 'all';
  minReward: number;
  models: ModelReport[];
  /** Sample ids left out of pass@k because their claims disagree, ordered by sample id. */
  disputed: DisputedSample[];
}

export interface ReportOptions {
  /** Only samples of this split (default all). */
  split?: 'train' | 'eval';
  /** Reward at or above which a sample passes (default 1). */
  minReward?: number;
  /** k for pass@k (default: the smallest per-task sample count of each model, at least 1). */
  k?: number;
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

/** A counted sample: the claim that stands for it and the reward pass@k counts. */
interface Counted {
  sample: StoredSample;
  reward: number;
  /** Claims of the sample id an audit contradicted. */
  auditFailures: number;
}

const inSplit = (split: ReportOptions['split'], r: Resolution) =>
  !split || (r.chosen ? r.chosen.digest.split === split : r.claims.some((c) => c.digest.split === split));

/**
 * Per-model pass rates over every scored sample of a dataset (verified or not): one per sample id,
 * claims of several origins resolved by node/collector/claims.ts (agreeing claims count once, an
 * audit-contradicted claim drops out, disagreeing claims leave pass@k and are listed as disputed).
 */
export function buildReport(samples: readonly StoredSample[], options: ReportOptions = {}): Report {
  const minReward = options.minReward ?? 1;
  const byModel = new Map<string, Counted[]>();
  const disputedByModel = new Map<string, number>();
  const disputed: DisputedSample[] = [];
  for (const r of resolveAll(samples)) {
    if (!inSplit(options.split, r)) continue;
    if (r.reward === null || !r.chosen) {
      if (!r.disputed) continue;
      disputed.push({
        sampleId: r.sampleId,
        claims: r.claims.map((c) => ({
          origin: c.digest.origin,
          seq: c.digest.seq,
          taskId: c.digest.taskId,
          model: c.digest.model,
          reward: c.digest.reward,
          bodyState: c.bodyState,
          audit: c.audit,
        })),
      });
      for (const model of new Set(r.claims.map((c) => c.digest.model)))
        disputedByModel.set(model, (disputedByModel.get(model) ?? 0) + 1);
      continue;
    }
    const model = r.chosen.digest.model;
    const list = byModel.get(model) ?? [];
    list.push({
      sample: r.chosen,
      reward: r.reward,
      auditFailures: r.claims.filter((c) => c.audit === 'failed').length,
    });
    byModel.set(model, list);
  }
  const models: ModelReport[] = [];
  for (const [model, list] of [...byModel].sort(([a], [b]) => a.localeCompare(b))) {
    const perTask = new Map<string, { n: number; c: number }>();
    let rewardSum = 0;
    for (const { sample, reward } of list) {
      const t = perTask.get(sample.digest.taskId) ?? { n: 0, c: 0 };
      t.n++;
      if (reward >= minReward) t.c++;
      rewardSum += reward;
      perTask.set(sample.digest.taskId, t);
    }
    const counts = [...perTask.values()];
    const k = options.k ?? Math.max(1, Math.min(...counts.map((t) => t.n)));
    const eligible = counts.filter((t) => t.n >= k);
    const bodies = list.flatMap(({ sample }) => (sample.body ? [sample.body] : []));
    // Servers that report no cached count are left out of the cached-token rate.
    const counted = bodies.filter((b) => b.generation.usage.cached !== null);
    const prompt = counted.reduce((a, b) => a + b.generation.usage.prompt, 0);
    const cached = counted.reduce((a, b) => a + (b.generation.usage.cached ?? 0), 0);
    models.push({
      model,
      tasks: perTask.size,
      samples: list.length,
      pass1: round(counts.reduce((a, t) => a + t.c / t.n, 0) / counts.length),
      passk:
        eligible.length > 0
          ? round(eligible.reduce((a, t) => a + passAtK(t.n, t.c, k), 0) / eligible.length)
          : null,
      k,
      passkTasks: eligible.length,
      meanReward: round(rewardSum / list.length),
      bodies: bodies.length,
      truncationRate: bodies.length
        ? round(bodies.filter((b) => b.generation.truncated).length / bodies.length)
        : null,
      tokensPerSecond: bodies.length
        ? round(bodies.reduce((a, b) => a + b.generation.tokensPerSecond, 0) / bodies.length)
        : null,
      // The same figure as `vtnode run`'s cache hits for the same samples: prompts found warm.
      cacheHitRate: bodies.length
        ? round(bodies.filter((b) => b.generation.warm).length / bodies.length)
        : null,
      cachedTokenRate: prompt > 0 ? round(cached / prompt) : null,
      auditFailures: list.reduce((a, c) => a + c.auditFailures, 0),
      disputed: disputedByModel.get(model) ?? 0,
    });
  }
  return { split: options.split ?? 'all', minReward, models, disputed };
}
