import { passAtK } from './passk.ts';
import type { StoredSample } from './store.ts';

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
  /** Cached prompt tokens over all prompt tokens. */
  cacheHitRate: number | null;
  /** Samples whose claimed reward an audit contradicted (counted with the audited reward). */
  auditFailures: number;
}

export interface Report {
  split: 'train' | 'eval' | 'all';
  minReward: number;
  models: ModelReport[];
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

/**
 * Per-model pass rates over every scored sample of a dataset (verified or not): one sample per
 * sample id (the first origin by id), the audited reward where an audit contradicted the claim.
 */
export function buildReport(samples: readonly StoredSample[], options: ReportOptions = {}): Report {
  const minReward = options.minReward ?? 1;
  const seen = new Set<string>();
  const byModel = new Map<string, StoredSample[]>();
  const sorted = [...samples].sort(
    (a, b) =>
      a.digest.sampleId.localeCompare(b.digest.sampleId) || a.digest.origin.localeCompare(b.digest.origin),
  );
  for (const s of sorted) {
    if (options.split && s.digest.split !== options.split) continue;
    if (seen.has(s.digest.sampleId)) continue;
    seen.add(s.digest.sampleId);
    const list = byModel.get(s.digest.model) ?? [];
    list.push(s);
    byModel.set(s.digest.model, list);
  }
  const models: ModelReport[] = [];
  for (const [model, list] of [...byModel].sort(([a], [b]) => a.localeCompare(b))) {
    const rewardOf = (s: StoredSample) =>
      s.audit === 'failed' && s.auditReward !== null ? s.auditReward : s.digest.reward;
    const perTask = new Map<string, { n: number; c: number }>();
    let rewardSum = 0;
    for (const s of list) {
      const t = perTask.get(s.digest.taskId) ?? { n: 0, c: 0 };
      t.n++;
      const r = rewardOf(s);
      if (r >= minReward) t.c++;
      rewardSum += r;
      perTask.set(s.digest.taskId, t);
    }
    const counts = [...perTask.values()];
    const k = options.k ?? Math.max(1, Math.min(...counts.map((t) => t.n)));
    const eligible = counts.filter((t) => t.n >= k);
    const bodies = list.flatMap((s) => (s.body ? [s.body] : []));
    // Servers that report no cached count are left out of the cache-hit rate.
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
      cacheHitRate: prompt > 0 ? round(cached / prompt) : null,
      auditFailures: list.filter((s) => s.audit === 'failed').length,
    });
  }
  return { split: options.split ?? 'all', minReward, models };
}
