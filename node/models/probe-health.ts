/**
 * Slow is not down: the health of one model server from its probes, pure. A probe that fails at
 * once (connection refused or reset, no such host, an HTTP 5xx, an answer that is not an
 * OpenAI-compatible server's) means the server is down now. A probe that times out means only that
 * the server is slow (a model loading, a machine busy with generation): the server keeps its place
 * and its models, the next probe waits twice as long (up to a cap) and follows at once, and only
 * `maxTimeouts` timeouts in a row count as down.
 */

export interface ProbeHealthOptions {
  /** Time the first probe may take, ms (default 3000). */
  timeoutMs?: number;
  /** Longest a probe may be given after timeouts, ms (default 30,000). */
  maxTimeoutMs?: number;
  /** Timeouts in a row after which the server counts as down (default 3). */
  maxTimeouts?: number;
}

/** What one probe found: an answer, a failure that says the server is down, or no answer in time. */
export type ProbeOutcome = 'ok' | 'down' | 'timeout';

export interface ProbeHealth {
  /** `unknown` before any answer, `up` after one, `slow` while timeouts are forgiven, `down`. */
  status: 'unknown' | 'up' | 'slow' | 'down';
  /** Timeouts in a row. */
  timeouts: number;
  /** Time the next probe may take, ms. */
  timeoutMs: number;
  /** Probe again now (after a forgiven timeout) rather than at the next interval. */
  retryNow: boolean;
}

export interface ProbeHealthModel {
  readonly initial: ProbeHealth;
  /** The health after a probe ended with `outcome`. */
  next(health: ProbeHealth, outcome: ProbeOutcome): ProbeHealth;
  /** True when the server's last known description (its models) should still be advertised. */
  serving(health: ProbeHealth): boolean;
}

function positive(name: string, value: number, integer = false): number {
  if (!(value > 0) || !Number.isFinite(value) || (integer && !Number.isInteger(value)))
    throw new RangeError(`${name} must be a positive ${integer ? 'integer' : 'number'}, got ${value}`);
  return value;
}

export function probeHealthModel(options: ProbeHealthOptions = {}): ProbeHealthModel {
  const base = positive('timeoutMs', options.timeoutMs ?? 3000);
  const max = Math.max(base, positive('maxTimeoutMs', options.maxTimeoutMs ?? 30_000));
  const maxTimeouts = positive('maxTimeouts', options.maxTimeouts ?? 3, true);
  const initial: ProbeHealth = { status: 'unknown', timeouts: 0, timeoutMs: base, retryNow: false };
  return {
    initial,
    next(health, outcome) {
      if (outcome === 'ok') return { status: 'up', timeouts: 0, timeoutMs: base, retryNow: false };
      if (outcome === 'down') return { status: 'down', timeouts: 0, timeoutMs: base, retryNow: false };
      const timeouts = health.timeouts + 1;
      const timeoutMs = Math.min(max, health.timeoutMs * 2);
      if (timeouts >= maxTimeouts) return { status: 'down', timeouts, timeoutMs, retryNow: false };
      // A server never seen up stays unknown; a known one is slow; a down one stays down until it answers.
      const status = health.status === 'up' || health.status === 'slow' ? 'slow' : health.status;
      return { status, timeouts, timeoutMs, retryNow: true };
    },
    serving(health) {
      return health.status === 'up' || health.status === 'slow';
    },
  };
}
