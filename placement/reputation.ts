export interface ReputationOptions {
  /** Time for a penalty to halve, ms (default 10 minutes). */
  halfLifeMs?: number;
  /** Penalty one retryable failure adds (default 1). */
  failurePenalty?: number;
  /** Factor a success multiplies the penalty by, in [0, 1] (default 0.5). */
  successFactor?: number;
  /** Cool-down after the first failure in a row, ms (default 30 s); it doubles per further failure. */
  coolDownMs?: number;
  /** Longest cool-down, ms (default 10 minutes). */
  maxCoolDownMs?: number;
  /** Penalty below which a node with no cool-down left is forgotten by `prune` (default 0.01). */
  forgetBelow?: number;
}

/** What the reputation book knows of one node at a given time. */
export interface NodeStanding {
  /** Decayed penalty (0 = clean). */
  penalty: number;
  /** Failures since the last success. */
  consecutiveFailures: number;
  /** End of the cool-down, ms since epoch (0 = none yet). */
  coolDownUntil: number;
  /** Factor in (0, 1] applied to the node's placement weight: 1 / (1 + penalty). */
  weightFactor: number;
}

/**
 * Per-node reputation: retryable failures (a refused or failed job, a missed deadline, a
 * disconnect mid-job) add a penalty that decays exponentially with time and put the node in a
 * cool-down that doubles with each failure in a row; a success multiplies the penalty down and
 * ends the streak. Pure: every call takes the current time.
 */
export interface Reputation {
  /** Records a retryable failure at `now`; returns the node's standing after it. */
  failure(peerId: string, now: number): NodeStanding;
  /** Records a success at `now`; returns the node's standing after it. */
  success(peerId: string, now: number): NodeStanding;
  /** The node's standing at `now` (a clean standing for unknown nodes). */
  standing(peerId: string, now: number): NodeStanding;
  /** True while the node's cool-down lasts. */
  coolingDown(peerId: string, now: number): boolean;
  /** Weight factor at `now`, 1 / (1 + penalty). */
  weightFactor(peerId: string, now: number): number;
  /** Forgets nodes whose penalty decayed below `forgetBelow` and whose cool-down is over; returns their ids. */
  prune(now: number): string[];
  /** Nodes with a record. */
  readonly size: number;
}

interface Entry {
  penalty: number;
  at: number;
  consecutiveFailures: number;
  coolDownUntil: number;
}

function positive(name: string, value: number): number {
  if (!(value > 0) || !Number.isFinite(value))
    throw new RangeError(`${name} must be a positive number, got ${value}`);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!(value >= 0) || !Number.isFinite(value))
    throw new RangeError(`${name} must be a non-negative number, got ${value}`);
  return value;
}

export function createReputation(options: ReputationOptions = {}): Reputation {
  const halfLifeMs = positive('halfLifeMs', options.halfLifeMs ?? 600_000);
  const failurePenalty = positive('failurePenalty', options.failurePenalty ?? 1);
  const successFactor = nonNegative('successFactor', options.successFactor ?? 0.5);
  if (successFactor > 1) throw new RangeError(`successFactor must be at most 1, got ${successFactor}`);
  const coolDownMs = nonNegative('coolDownMs', options.coolDownMs ?? 30_000);
  const maxCoolDownMs = nonNegative('maxCoolDownMs', options.maxCoolDownMs ?? 600_000);
  if (maxCoolDownMs < coolDownMs)
    throw new RangeError(`maxCoolDownMs (${maxCoolDownMs}) must be at least coolDownMs (${coolDownMs})`);
  const forgetBelow = nonNegative('forgetBelow', options.forgetBelow ?? 0.01);
  const entries = new Map<string, Entry>();

  /** Penalty decayed to `now`; time never runs backwards for the decay (a clock step back decays nothing). */
  const decayed = (entry: Entry, now: number): number =>
    entry.penalty * 0.5 ** (Math.max(0, now - entry.at) / halfLifeMs);

  const view = (entry: Entry | undefined, now: number): NodeStanding => {
    if (!entry) return { penalty: 0, consecutiveFailures: 0, coolDownUntil: 0, weightFactor: 1 };
    const penalty = decayed(entry, now);
    return {
      penalty,
      consecutiveFailures: entry.consecutiveFailures,
      coolDownUntil: entry.coolDownUntil,
      weightFactor: 1 / (1 + penalty),
    };
  };

  const checkTime = (now: number): void => {
    if (!Number.isFinite(now)) throw new RangeError(`now must be a finite number of ms, got ${now}`);
  };

  return {
    failure(peerId, now) {
      checkTime(now);
      const entry = entries.get(peerId);
      const before = entry ? decayed(entry, now) : 0;
      const streak = (entry?.consecutiveFailures ?? 0) + 1;
      const coolDown = Math.min(maxCoolDownMs, coolDownMs * 2 ** Math.min(streak - 1, 52));
      const next: Entry = {
        penalty: before + failurePenalty,
        at: Math.max(now, entry?.at ?? now),
        consecutiveFailures: streak,
        coolDownUntil: Math.max(entry?.coolDownUntil ?? 0, now + coolDown),
      };
      entries.set(peerId, next);
      return view(next, now);
    },
    success(peerId, now) {
      checkTime(now);
      const entry = entries.get(peerId);
      if (!entry) return view(undefined, now);
      const next: Entry = {
        penalty: decayed(entry, now) * successFactor,
        at: Math.max(now, entry.at),
        consecutiveFailures: 0,
        coolDownUntil: entry.coolDownUntil,
      };
      entries.set(peerId, next);
      return view(next, now);
    },
    standing(peerId, now) {
      checkTime(now);
      return view(entries.get(peerId), now);
    },
    coolingDown(peerId, now) {
      const entry = entries.get(peerId);
      return entry !== undefined && now < entry.coolDownUntil;
    },
    weightFactor(peerId, now) {
      const entry = entries.get(peerId);
      return entry ? 1 / (1 + decayed(entry, now)) : 1;
    },
    prune(now) {
      checkTime(now);
      const dropped: string[] = [];
      for (const [peerId, entry] of entries) {
        if (now >= entry.coolDownUntil && decayed(entry, now) < forgetBelow) {
          entries.delete(peerId);
          dropped.push(peerId);
        }
      }
      return dropped;
    },
    get size() {
      return entries.size;
    },
  };
}
