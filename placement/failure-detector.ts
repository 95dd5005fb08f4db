/**
 * The φ accrual failure detector (Hayashibara, Défago, Yared, Katayama, "The φ accrual failure
 * detector", SRDS 2004), pure: the caller passes every time. For each peer it keeps a window of
 * heartbeat inter-arrival gaps (here: adverts), fits a normal distribution to them, and turns the
 * current silence into a suspicion level φ = −log10(P(a gap at least this long)). A peer whose
 * adverts arrive with wide jitter (a busy machine) gets a proportionally longer grace than one whose
 * adverts are regular, so a slow node is not declared dead while a dead one still is, within a bound.
 *
 * Three guards around the statistics (as in Akka's and Cassandra's implementations):
 * - a floor on the standard deviation, so a run of perfectly regular adverts does not make the very
 *   next late one fatal;
 * - an acceptable pause added to the expected gap (a GC pause, a stalled event loop, a gossip hop);
 * - a minimum silence (never suspected sooner: no stricter than "3 missed adverts") and a maximum
 *   silence (always suspected by then, whatever the history: detection is bounded).
 * A peer whose connection is down is suspected at the minimum silence: a closed connection and
 * silence together are evidence enough (a process killed with -9), and no statistics are needed.
 */

export interface FailureDetectorOptions {
  /** Nominal heartbeat (advert) interval, ms: the expected gap before any gap is measured. */
  intervalMs: number;
  /** Suspicion level φ at or above which a peer is suspected (default 8: a false suspicion about once in 10^8 gaps under the fitted normal). */
  threshold?: number;
  /** Gaps kept per peer, newest last (default 100). */
  windowSize?: number;
  /** Floor of the gaps' standard deviation, ms (default intervalMs / 2). */
  minStdDevMs?: number;
  /** Silence tolerated on top of the expected gap, ms (default 2 × intervalMs). */
  acceptablePauseMs?: number;
  /** Silence a peer may keep without ever being suspected, ms (default 3 × intervalMs: "3 missed adverts"). */
  minSilenceMs?: number;
  /** Silence at which a peer is suspected whatever its history, ms (default 12 × intervalMs). */
  maxSilenceMs?: number;
  /** Peers remembered at most; the longest silent are forgotten first (default 4096). */
  maxPeers?: number;
}

/** What the detector knows about one peer. */
export interface PeerLiveness {
  /** Time of the last heartbeat, ms. */
  lastAt: number;
  /** Gaps measured (at most windowSize). */
  samples: number;
  /** Mean gap used, ms (the interval until a gap is measured). */
  meanMs: number;
  /** Standard deviation used, ms (after the floor). */
  stdDevMs: number;
  /** The silence at which the peer becomes suspected while connected, ms. */
  suspectAfterMs: number;
}

export interface FailureDetector {
  /** A heartbeat from `peer` arrived at `now`. Earlier times than the last one are ignored. */
  heartbeat(peer: string, now: number): void;
  /** The suspicion level φ of `peer` at `now` (0 for an unknown peer or right after a heartbeat). */
  phi(peer: string, now: number): number;
  /** True when `peer` counts as failed at `now`; `connected: false` (its connection is down) suspects it at the minimum silence. */
  suspected(peer: string, now: number, connected?: boolean): boolean;
  /** The statistics of `peer`, or undefined if it never sent a heartbeat. */
  liveness(peer: string): PeerLiveness | undefined;
  /** Forgets a peer (it left): its next heartbeat starts a fresh history. */
  remove(peer: string): void;
}

/** A fixed-size window of gaps with running sums. */
interface History {
  lastAt: number;
  gaps: number[];
  next: number;
  sum: number;
  sumSquares: number;
}

/** −log10 of the upper tail of the standard normal at y, by the logistic approximation (error < 0.0002 in the CDF). */
export function phiOf(y: number): number {
  // P(Y > y) ≈ 1 / (1 + exp(a)), a = y (1.5976 + 0.070566 y²); each branch is −log10 of it in the
  // form that neither overflows nor cancels on its side of 0.
  const a = y * (1.5976 + 0.070566 * y * y);
  return a > 0 ? a / Math.LN10 + Math.log10(1 + Math.exp(-a)) : Math.log10(1 + Math.exp(a));
}

/** The y at which phiOf(y) reaches `threshold` (phiOf is increasing): bisection. */
function yFor(threshold: number): number {
  let lo = -10;
  let hi = 40;
  for (let i = 0; i < 100; i++) {
    const mid = (lo + hi) / 2;
    if (phiOf(mid) < threshold) lo = mid;
    else hi = mid;
  }
  return hi;
}

function check(name: string, value: number, min: number): number {
  if (!Number.isFinite(value) || value < min)
    throw new RangeError(`${name} must be a finite number ≥ ${min}, got ${value}`);
  return value;
}

export function createFailureDetector(options: FailureDetectorOptions): FailureDetector {
  const interval = check('intervalMs', options.intervalMs, 1);
  const threshold = check('threshold', options.threshold ?? 8, 0.5);
  const windowSize = check('windowSize', options.windowSize ?? 100, 1);
  if (!Number.isInteger(windowSize)) throw new RangeError(`windowSize must be an integer, got ${windowSize}`);
  const minStd = check('minStdDevMs', options.minStdDevMs ?? interval / 2, 1);
  const pause = check('acceptablePauseMs', options.acceptablePauseMs ?? 2 * interval, 0);
  const minSilence = check('minSilenceMs', options.minSilenceMs ?? 3 * interval, 0);
  const maxSilence = check('maxSilenceMs', options.maxSilenceMs ?? 12 * interval, minSilence);
  const maxPeers = check('maxPeers', options.maxPeers ?? 4096, 1);
  const yThreshold = yFor(threshold);
  const peers = new Map<string, History>();

  const stats = (h: History): { mean: number; std: number; samples: number } => {
    const n = h.gaps.length;
    if (n === 0) return { mean: interval, std: Math.max(minStd, interval / 4), samples: 0 };
    const mean = h.sum / n;
    const variance = Math.max(0, h.sumSquares / n - mean * mean);
    return { mean, std: Math.max(minStd, Math.sqrt(variance)), samples: n };
  };

  const suspectAfter = (h: History): number => {
    const { mean, std } = stats(h);
    return Math.min(maxSilence, Math.max(minSilence, mean + pause + yThreshold * std));
  };

  const forgetOne = () => {
    let oldest: string | null = null;
    let at = Number.POSITIVE_INFINITY;
    for (const [peer, h] of peers)
      if (h.lastAt < at) {
        at = h.lastAt;
        oldest = peer;
      }
    if (oldest !== null) peers.delete(oldest);
  };

  return {
    heartbeat(peer, now) {
      const h = peers.get(peer);
      if (!h) {
        if (peers.size >= maxPeers) forgetOne();
        peers.set(peer, { lastAt: now, gaps: [], next: 0, sum: 0, sumSquares: 0 });
        return;
      }
      if (now < h.lastAt) return;
      const gap = now - h.lastAt;
      h.lastAt = now;
      if (h.gaps.length < windowSize) h.gaps.push(gap);
      else {
        const old = h.gaps[h.next]!;
        h.sum -= old;
        h.sumSquares -= old * old;
        h.gaps[h.next] = gap;
        h.next = (h.next + 1) % windowSize;
      }
      h.sum += gap;
      h.sumSquares += gap * gap;
      // Once per window, recompute the sums exactly (running subtraction drifts over days).
      if (h.next === 0 && h.gaps.length === windowSize) {
        h.sum = h.gaps.reduce((a, b) => a + b, 0);
        h.sumSquares = h.gaps.reduce((a, b) => a + b * b, 0);
      }
    },
    phi(peer, now) {
      const h = peers.get(peer);
      if (!h) return 0;
      const { mean, std } = stats(h);
      const silence = Math.max(0, now - h.lastAt);
      return Math.max(0, phiOf((silence - mean - pause) / std));
    },
    suspected(peer, now, connected = true) {
      const h = peers.get(peer);
      if (!h) return false;
      const silence = now - h.lastAt;
      if (silence <= minSilence) return false;
      if (!connected) return true;
      return silence >= suspectAfter(h);
    },
    liveness(peer) {
      const h = peers.get(peer);
      if (!h) return undefined;
      const { mean, std, samples } = stats(h);
      return { lastAt: h.lastAt, samples, meanMs: mean, stdDevMs: std, suspectAfterMs: suspectAfter(h) };
    },
    remove(peer) {
      peers.delete(peer);
    },
  };
}
