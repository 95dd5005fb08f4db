/**
 * Hedging: when a job has gone silent for much longer than jobs of its model usually take between
 * two progress events (a sample generated or scored), a backup of it is placed on another node with
 * a free slot, and the first result of each sample counts (placement/lease-book.ts `hedge`). A node
 * that accepts jobs and never answers, or one stuck behind a hung model server, then holds a campaign
 * up for a few typical gaps instead of the whole job deadline. Pure: the submitter feeds progress
 * times in and asks which jobs to back up.
 *
 * Silence is a node's, not a job's: a job queued on a node behind its other jobs sends nothing until
 * it starts, yet its node is healthy while any of its jobs progress. So a job counts as stalled only
 * when its node has sent no progress on any job for the stall time (found by the 20,000-sample load
 * drill: per-job silence backed up 16 % of the jobs of busy nodes, redoing their samples elsewhere).
 * A node that progresses one job while sitting on others it accepted holds them at most until their
 * lease deadline, and only as many as its advertised slots.
 *
 * A node that scores slowly (a cold type-check on a loaded machine) sends `scoring` heartbeats while
 * its samples wait for or run in its sandbox: a node with a fresh heartbeat gets `beatGraceMs` more
 * than the stall time since its last real progress before its jobs are backed up. Heartbeats cost
 * nothing to forge, so they only stretch the wait, by a fixed amount (a multiple of the stall time
 * grew to minutes where gaps are long): a node that beats and never delivers is still backed up.
 */

export interface HedgeOptions {
  /** Shortest silence that counts as a stall, ms (default 30 s). */
  minStallMs?: number;
  /** A stall is a silence this many times the model's typical gap between progress events (default 4). */
  factor?: number;
  /** Silence that counts as a stall while no gap of the model (or any model) is measured, ms (default 3 minutes). */
  unmeasuredStallMs?: number;
  /** Gaps remembered per model; the typical gap is their 90th percentile (default 128). */
  window?: number;
  /** A node whose last heartbeat is within the stall time is backed up this much later, ms (default 60 s). */
  beatGraceMs?: number;
}

/** An active job as the hedger sees it. */
export interface WatchedJob {
  jobId: string;
  peerId: string;
  model: string;
  /** Last progress (placed, accepted, generated, scored), ms since epoch. */
  lastProgressAt: number;
  /** Last progress of any job on its node (finished ones too), ms since epoch; 0 when none. */
  nodeProgressAt?: number;
  /** Last `scoring` heartbeat of the job, ms since epoch; absent when none (not progress: see beatGraceMs). */
  beatAt?: number;
  /** True for a backup, or for a job that has one: neither is backed up again. */
  hedged: boolean;
}

export interface Hedger {
  /** Records the gap between two progress events of a job of `model`, ms. */
  gap(model: string, ms: number): void;
  /** The 90th-percentile gap of `model` (or of all models when it has none yet), or null. */
  typicalGap(model: string): number | null;
  /** Silence after which a job of `model` counts as stalled, ms. */
  stallMs(model: string): number;
  /** Jobs to back up at `now`, the longest silent first. */
  stalled(jobs: Iterable<WatchedJob>, now: number): WatchedJob[];
}

function positive(name: string, value: number): number {
  if (!(value > 0) || !Number.isFinite(value))
    throw new RangeError(`${name} must be a positive number, got ${value}`);
  return value;
}

function percentile90(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))]!;
}

/** The hedger's defaults. */
export const HEDGE_DEFAULTS = {
  minStallMs: 30_000,
  factor: 4,
  unmeasuredStallMs: 180_000,
  window: 128,
  beatGraceMs: 60_000,
} as const satisfies Required<HedgeOptions>;

/**
 * The defaults with every wait (minStallMs, unmeasuredStallMs, beatGraceMs) times `scale`, the
 * factor and window unchanged: the same rules on a faster clock (tests run them at a quarter). Pure.
 */
export function scaledHedge(scale: number): HedgeOptions {
  positive('scale', scale);
  return {
    minStallMs: HEDGE_DEFAULTS.minStallMs * scale,
    unmeasuredStallMs: HEDGE_DEFAULTS.unmeasuredStallMs * scale,
    beatGraceMs: HEDGE_DEFAULTS.beatGraceMs * scale,
  };
}

export function createHedger(options: HedgeOptions = {}): Hedger {
  const o = { ...HEDGE_DEFAULTS, ...options };
  const minStallMs = positive('minStallMs', o.minStallMs);
  const factor = positive('factor', o.factor);
  const unmeasuredStallMs = positive('unmeasuredStallMs', o.unmeasuredStallMs);
  const window = Math.floor(positive('window', o.window));
  const beatGraceMs = positive('beatGraceMs', o.beatGraceMs);
  /** model → its most recent gaps (a ring, oldest overwritten). */
  const gaps = new Map<string, number[]>();
  const next = new Map<string, number>();

  const typicalGap = (model: string): number | null => {
    const own = gaps.get(model);
    if (own && own.length > 0) return percentile90(own);
    const all = [...gaps.values()].flat();
    return all.length > 0 ? percentile90(all) : null;
  };

  const stallMs = (model: string): number => {
    const typical = typicalGap(model);
    return typical === null ? unmeasuredStallMs : Math.max(minStallMs, factor * typical);
  };

  return {
    gap(model, ms) {
      if (!Number.isFinite(ms) || ms < 0)
        throw new RangeError(`gap must be a non-negative number of ms, got ${ms}`);
      let ring = gaps.get(model);
      if (!ring) {
        ring = [];
        gaps.set(model, ring);
      }
      const at = next.get(model) ?? 0;
      ring[at] = ms;
      next.set(model, (at + 1) % window);
    },
    typicalGap,
    stallMs,
    stalled(jobs, now) {
      const out: WatchedJob[] = [];
      // One percentile per model per call, however many jobs run.
      const stalls = new Map<string, number>();
      const list = [...jobs];
      const nodeLast = new Map<string, number>();
      const nodeBeat = new Map<string, number>();
      for (const job of list) {
        nodeLast.set(
          job.peerId,
          Math.max(nodeLast.get(job.peerId) ?? 0, job.lastProgressAt, job.nodeProgressAt ?? 0),
        );
        nodeBeat.set(job.peerId, Math.max(nodeBeat.get(job.peerId) ?? 0, job.beatAt ?? 0));
      }
      for (const job of list) {
        if (job.hedged) continue;
        const stall = stalls.get(job.model) ?? stallMs(job.model);
        stalls.set(job.model, stall);
        const silent = now - nodeLast.get(job.peerId)!;
        const beating = now - nodeBeat.get(job.peerId)! <= stall;
        if (silent > (beating ? stall + beatGraceMs : stall)) out.push(job);
      }
      // The longest silent node first, and its longest silent job first.
      const silence = (j: WatchedJob) => nodeLast.get(j.peerId)!;
      return out.sort((a, b) => silence(a) - silence(b) || a.lastProgressAt - b.lastProgressAt);
    },
  };
}
