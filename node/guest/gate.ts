import { loadavg } from 'node:os';
import type { Logger } from '../logger.ts';
import type { IdleSource, PowerSource, PowerState } from './power.ts';

/** When a guest node stops taking jobs. */
export interface GuestPolicy {
  /** Take no new jobs while the machine runs on battery. */
  pauseOnBattery: boolean;
  /** Take no new jobs while the 1-minute load average is above this; null = no limit. */
  maxLoad: number | null;
  /** Take no new jobs while the owner used the keyboard or mouse within this many ms (macOS); null = never. */
  pauseWhileUsedMs?: number | null;
}

/** What the gate saw at one check. */
export interface GuestReading {
  power: PowerState;
  /** 1-minute load average. */
  load1: number;
  /** Time since the owner's last input, ms, or null where unknown. */
  idleMs?: number | null;
}

/**
 * A load above `maxLoad` pauses the node; it resumes once the load is back under this share of it.
 * The load average counts the node's own scoring too, so without this margin a node would pause,
 * let its jobs finish, resume, and pause again every minute.
 */
export const RESUME_LOAD_SHARE = 0.75;

/**
 * Why the node should take no new jobs now, or null. Pure. `paused` is the current state, for the
 * load's hysteresis (a paused node resumes below RESUME_LOAD_SHARE × maxLoad).
 */
export function pauseReason(policy: GuestPolicy, reading: GuestReading, paused: boolean): string | null {
  if (policy.pauseOnBattery && reading.power.onBattery === true) {
    const pct = reading.power.percent === null ? '' : ` (${reading.power.percent}%)`;
    return `on battery${pct}`;
  }
  const used = policy.pauseWhileUsedMs ?? null;
  if (used !== null && reading.idleMs != null && reading.idleMs < used)
    return `in use (keyboard or mouse within ${formatMinutes(used)})`;
  if (policy.maxLoad !== null) {
    const limit = paused ? policy.maxLoad * RESUME_LOAD_SHARE : policy.maxLoad;
    if (reading.load1 > limit) return `load ${reading.load1.toFixed(1)} above --max-load ${policy.maxLoad}`;
  }
  return null;
}

function formatMinutes(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;
}

export interface GuestGateOptions {
  /** When to pause. */
  policy: GuestPolicy;
  /** The machine's power state (platformPowerSource()). */
  power: PowerSource;
  /** Time since the owner's last input (platformIdleSource()); needed for `pauseWhileUsedMs`. */
  idle?: IdleSource;
  /** 1-minute load average (default os.loadavg()[0]). */
  load?: () => number;
  /** Time between checks, ms (default 10 s). */
  intervalMs?: number;
  /** Called when the node pauses or resumes (the advert changes). */
  onChange: () => void;
  /** The component's logger. */
  log: Logger;
}

export interface GuestGate {
  /** Why the node takes no new jobs now, or null. */
  paused(): string | null;
  /** When the current pause began, ms since epoch, or null. */
  since(): number | null;
  /** Checks now (the first check runs before start resolves), then every interval. */
  start(): Promise<void>;
  stop(): void;
}

/**
 * A guest's manners: checks the machine's power and load every interval and pauses the node (no new
 * jobs, none advertised; running jobs finish) while the policy says so. A node with neither
 * `pauseOnBattery` nor `maxLoad` never checks anything.
 */
export function createGuestGate(options: GuestGateOptions): GuestGate {
  const { policy, log } = options;
  const load = options.load ?? (() => loadavg()[0]!);
  const usedMs = policy.pauseWhileUsedMs ?? null;
  const active = policy.pauseOnBattery || policy.maxLoad !== null || usedMs !== null;
  const abort = new AbortController();
  let reason: string | null = null;
  let since: number | null = null;
  let timer: NodeJS.Timeout | null = null;

  async function check(): Promise<void> {
    const power = policy.pauseOnBattery
      ? await options.power.read(abort.signal)
      : { onBattery: null, percent: null };
    const idleMs = usedMs !== null && options.idle ? await options.idle.idleMs(abort.signal) : null;
    if (abort.signal.aborted) return;
    const next = pauseReason(policy, { power, load1: load(), idleMs }, reason !== null);
    if ((next === null) === (reason === null)) {
      reason = next;
      return;
    }
    if (next) log.info('paused: %s; running jobs finish, new ones go elsewhere', next);
    else log.info('resumed: %s is over; taking jobs again', reason);
    reason = next;
    since = next ? Date.now() : null;
    options.onChange();
  }

  function schedule(): void {
    timer = setTimeout(() => {
      void check()
        .catch((err: Error) => log.warn('checking power and load failed: %s', err.message))
        .finally(() => {
          if (!abort.signal.aborted) schedule();
        });
    }, options.intervalMs ?? 10_000);
    timer.unref();
  }

  return {
    paused: () => reason,
    since: () => since,
    async start() {
      if (!active) return;
      await check().catch((err: Error) => log.warn('checking power and load failed: %s', err.message));
      schedule();
    },
    stop() {
      abort.abort();
      if (timer) clearTimeout(timer);
    },
  };
}
