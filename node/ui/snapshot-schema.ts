import * as z from 'zod/mini';

// The web view's one message: a full snapshot of what this node knows. Shared by the server (which
// builds and checks it) and the page (which parses every event with it). zod/mini, so the page's
// bundle stays small (the classic API would add ~450 kB); it imports nothing of ours.

const count = z.number().check(z.int(), z.minimum(0));
const share = z.number().check(z.minimum(0), z.maximum(1));
const text = z.string().check(z.minLength(1));

export const UiNode = z.object({
  peerId: text,
  /** Last 8 characters of the peer id. */
  shortId: text,
  self: z.boolean(),
  host: z.nullable(z.string()),
  roles: z.array(z.string()),
  models: z.array(z.object({ id: z.string(), loaded: z.boolean(), concurrency: count })),
  memory: z.object({ total: count, free: count }),
  load: z.object({ queued: count, running: count, capacity: count }),
  /** Prompt fingerprints the node advertises warm. */
  warm: count,
  sandbox: z.object({ backend: z.string(), ok: z.boolean() }),
  /** Trust the collector on this node gives the node (null: no collector here, or no sample from it). */
  trust: z.nullable(share),
  lastSeenMs: count,
});
export type UiNode = z.infer<typeof UiNode>;

export const UiCampaignNode = z.object({
  peerId: text,
  shortId: text,
  generated: count,
  scored: count,
  verified: count,
  /** Samples of jobs running on the node now. */
  running: count,
});

export const UiCampaign = z.object({
  name: text,
  status: z.enum(['running', 'done', 'incomplete', 'cancelled', 'stalled']),
  planned: count,
  placed: count,
  generated: count,
  scored: count,
  verified: count,
  /** scored / planned. */
  progress: share,
  /** Completion tokens per second of wall time since the campaign started (null before any). */
  tokensPerSecond: z.nullable(z.number().check(z.minimum(0))),
  /** Share of generated samples whose prompt was observed cached. */
  cacheHitRate: z.nullable(share),
  /** Estimated time to the last sample, ms (null while unknown; 0 once every sample is scored). */
  etaMs: z.nullable(count),
  startedAt: count,
  problem: z.nullable(z.string()),
  nodes: z.array(UiCampaignNode),
});
export type UiCampaign = z.infer<typeof UiCampaign>;

/** Reward bins of width 0.1 below 1; one more bin holds reward 1. */
export const REWARD_BINS = 10;

export const UiDataset = z.object({
  dir: z.string(),
  digests: count,
  samples: count,
  bodies: count,
  pending: count,
  rejected: count,
  audits: count,
  auditFailures: count,
  lagP50Ms: z.nullable(z.number()),
  lagP99Ms: z.nullable(z.number()),
  /** Samples held over time, from their bodies' scoring times (oldest first, bounded). */
  growth: z.array(z.object({ at: count, samples: count })),
  /** Scored samples per reward bin: [0, 0.1), ..., [0.9, 1.0), and reward 1 last. */
  rewards: z.array(count).check(z.length(REWARD_BINS + 1)),
  /** pass@1 and pass@k per model (node/collector/report.ts). */
  models: z.array(
    z.object({
      model: z.string(),
      tasks: count,
      samples: count,
      pass1: share,
      passk: z.nullable(share),
      k: count,
    }),
  ),
});
export type UiDataset = z.infer<typeof UiDataset>;

export const Snapshot = z.object({
  v: z.literal(1),
  /** When it was built, ms since epoch. */
  at: count,
  fleet: z.string(),
  self: z.string(),
  nodes: z.array(UiNode),
  campaigns: z.array(UiCampaign),
  /** Present on a collector node. */
  dataset: z.nullable(UiDataset),
});
export type Snapshot = z.infer<typeof Snapshot>;

/** Checks a snapshot object; the error names `what` and every bad field (path: message). */
export function checkSnapshot(value: unknown, what: string): Snapshot {
  const r = Snapshot.safeParse(value);
  if (r.success) return r.data;
  const detail = r.error.issues.map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`);
  throw new Error(`${what}: ${detail.join('; ')}`);
}

/** Parses a snapshot's JSON text (an SSE event's data, /api/state), naming `what` on failure. */
export function parseSnapshot(json: string, what: string): Snapshot {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new Error(`${what}: (root): not JSON (${(err as Error).message})`);
  }
  return checkSnapshot(value, what);
}
