import type { CollectorStats } from '../collector/collector.ts';
import type { ModelReport } from '../collector/report.ts';
import type { OriginTrust } from '../collector/trust.ts';
import type { FleetStatus, NodeStatus } from '../status.ts';
import type { CampaignStatus } from '../submitter/service.ts';
import {
  REWARD_BINS,
  type Snapshot,
  type UiCampaign,
  type UiDataset,
  type UiNode,
} from './snapshot-schema.ts';

// Pure builders of the web view's snapshot from what the daemon and the collector already report
// (`vtnode status`, campaign status, the dataset's samples). No I/O: node/ui/sources.ts gathers.

/** Most points of the dataset's growth series. */
export const MAX_GROWTH_POINTS = 60;

const shortId = (peerId: string) => peerId.slice(-8);

/** One fleet node as the page shows it; `trust` from this node's collector, when it has one. */
export function uiNode(n: NodeStatus, trust: ReadonlyMap<string, number>): UiNode {
  return {
    peerId: n.peerId,
    shortId: n.shortId,
    self: n.self,
    host: n.host,
    roles: n.roles,
    models: n.models.map((m) => ({ id: m.id, loaded: m.loaded, concurrency: m.concurrency })),
    memory: { total: n.memory.total, free: n.memory.free },
    load: n.load,
    warm: n.warm,
    sandbox: { backend: n.sandbox.backend, ok: n.sandbox.ok },
    trust: trust.get(n.peerId) ?? null,
    lastSeenMs: n.lastSeenMs,
  };
}

/** The fleet, self first, then by peer id. */
export function uiNodes(status: FleetStatus, trust: readonly OriginTrust[] = []): UiNode[] {
  const byOrigin = new Map(trust.map((t) => [t.origin, t.trust]));
  return status.nodes
    .map((n) => uiNode(n, byOrigin))
    .sort((a, b) => Number(b.self) - Number(a.self) || a.peerId.localeCompare(b.peerId));
}

/**
 * Time to the last sample from the scoring rate since the start, ms: null before the first sample
 * or when the campaign is not running; 0 once every planned sample is scored.
 */
export function etaMs(
  c: { status: string; planned: number; scored: number; startedAt: number },
  now: number,
) {
  if (c.scored >= c.planned) return 0;
  if (c.status !== 'running' || c.scored === 0 || c.startedAt <= 0 || now <= c.startedAt) return null;
  const perSample = (now - c.startedAt) / c.scored;
  return Math.round(perSample * (c.planned - c.scored));
}

/** One campaign: progress, throughput, cache hits, ETA and where its samples went. */
export function uiCampaign(c: CampaignStatus, now: number): UiCampaign {
  const s = c.summary.samples;
  const running = new Map<string, number>();
  for (const r of c.running) running.set(r.peerId, (running.get(r.peerId) ?? 0) + r.samples);
  const peers = new Set([...c.summary.nodes.map((n) => n.peerId), ...running.keys()]);
  const byPeer = new Map(c.summary.nodes.map((n) => [n.peerId, n]));
  const elapsedS = c.startedAt > 0 ? (now - c.startedAt) / 1000 : 0;
  const tokens = c.summary.completionTokens;
  return {
    name: c.name,
    status: c.status,
    planned: s.planned,
    placed: s.placed,
    generated: s.generated,
    scored: s.scored,
    verified: s.verified,
    progress: s.planned > 0 ? Math.min(1, s.scored / s.planned) : 0,
    tokensPerSecond: elapsedS > 0 && tokens > 0 ? tokens / elapsedS : null,
    cacheHitRate: c.summary.cacheHitRate,
    etaMs: etaMs({ status: c.status, planned: s.planned, scored: s.scored, startedAt: c.startedAt }, now),
    startedAt: c.startedAt,
    problem: c.problem,
    nodes: [...peers].sort().map((peerId) => {
      const n = byPeer.get(peerId);
      return {
        peerId,
        shortId: shortId(peerId),
        generated: n?.generated ?? 0,
        scored: n?.scored ?? 0,
        verified: n?.verified ?? 0,
        running: running.get(peerId) ?? 0,
      };
    }),
  };
}

/** Scored samples per reward bin: ten bins of width 0.1 below 1, and reward 1 in its own. */
export function rewardHistogram(rewards: Iterable<number>): number[] {
  const bins = new Array<number>(REWARD_BINS + 1).fill(0);
  for (const r of rewards) {
    if (!Number.isFinite(r)) continue;
    const i = r >= 1 ? REWARD_BINS : r <= 0 ? 0 : Math.min(REWARD_BINS - 1, Math.floor(r * REWARD_BINS));
    bins[i]! += 1;
  }
  return bins;
}

/**
 * The dataset's growth: samples held over time, from the times their bodies were scored, as at most
 * `points` cumulative points at equal steps from the first to the last (the last point is the total).
 */
export function growthOf(
  times: readonly number[],
  points = MAX_GROWTH_POINTS,
): { at: number; samples: number }[] {
  const sorted = times.filter(Number.isFinite).sort((x, y) => x - y);
  if (sorted.length === 0) return [];
  const first = sorted[0]!;
  const last = sorted.at(-1)!;
  if (first === last || points < 2) return [{ at: last, samples: sorted.length }];
  const out: { at: number; samples: number }[] = [];
  let i = 0;
  for (let p = 0; p < points; p++) {
    const at = p === points - 1 ? last : Math.round(first + ((last - first) * p) / (points - 1));
    while (i < sorted.length && sorted[i]! <= at) i++;
    if (out.at(-1)?.samples !== i) out.push({ at, samples: i });
  }
  return out;
}

/** The dataset figures read from its samples: growth, reward histogram, pass@k per model. */
export type DatasetFigures = Pick<UiDataset, 'growth' | 'rewards' | 'models'>;

/**
 * Figures of a dataset's samples: growth from the scoring times of the bodies held, the reward
 * histogram over distinct sample ids (the first claim of each), and each model's pass@1 and pass@k.
 */
export function datasetFigures(
  samples: readonly { digest: { sampleId: string; reward: number }; body: { scoredAt: number } | null }[],
  models: readonly ModelReport[],
): DatasetFigures {
  const seen = new Set<string>();
  const rewards: number[] = [];
  for (const s of samples) {
    if (seen.has(s.digest.sampleId)) continue;
    seen.add(s.digest.sampleId);
    rewards.push(s.digest.reward);
  }
  return {
    growth: growthOf(samples.flatMap((s) => (s.body ? [s.body.scoredAt] : []))),
    rewards: rewardHistogram(rewards),
    models: models.map((m) => ({
      model: m.model,
      tasks: m.tasks,
      samples: m.samples,
      pass1: m.pass1,
      passk: m.passk,
      k: m.k,
    })),
  };
}

/** The dataset panel of a collector node: its live counts and the figures last read. */
export function uiDataset(dir: string, stats: CollectorStats, figures: DatasetFigures): UiDataset {
  return {
    dir,
    digests: stats.digests,
    samples: stats.samples,
    bodies: stats.bodies,
    pending: stats.pending,
    rejected: stats.rejected,
    audits: stats.audits,
    auditFailures: stats.auditFailures,
    lagP50Ms: stats.lagP50Ms,
    lagP99Ms: stats.lagP99Ms,
    ...figures,
  };
}

/** The whole snapshot. */
export function buildSnapshot(input: {
  status: FleetStatus;
  campaigns: readonly CampaignStatus[];
  dataset: UiDataset | null;
  trust?: readonly OriginTrust[];
  now: number;
}): Snapshot {
  return {
    v: 1,
    at: input.now,
    fleet: input.status.fleet,
    self: input.status.self,
    nodes: uiNodes(input.status, input.trust),
    campaigns: input.campaigns.map((c) => uiCampaign(c, input.now)),
    dataset: input.dataset,
  };
}

/** Whether two snapshots differ in anything but their build time and nodes' advert ages. */
export function changed(a: Snapshot | null, b: Snapshot): boolean {
  if (!a) return true;
  const key = (s: Snapshot) =>
    JSON.stringify({ ...s, at: 0, nodes: s.nodes.map((n) => ({ ...n, lastSeenMs: 0 })) });
  return key(a) !== key(b);
}
