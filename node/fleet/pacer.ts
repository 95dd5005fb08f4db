/**
 * When a node publishes its advert (pure; node/fleet/fleet.ts drives it with the clock). A change
 * (load, warm list, models) is published at once, unless an advert went out less than `coalesceMs`
 * ago: then once, when that time is up, carrying every change made meanwhile. The heartbeat is
 * skipped when an advert went out less than half an interval ago: a busy node's adverts are its
 * heartbeats, and the gap between two adverts stays under 1.5 intervals (the failure detector
 * suspects no node before `missedIntervals` of silence, placement/fleet-view.ts).
 */
export interface PublishPacer {
  /** Something changed at `now`: 0 to publish now, else the ms to wait (a publish is then due). */
  changed(now: number): number;
  /** The heartbeat timer fired at `now`: true to publish. */
  heartbeat(now: number): boolean;
  /** An advert went out at `now`. */
  published(now: number): void;
}

export interface PublishPacerOptions {
  /** Heartbeat interval, ms. */
  intervalMs: number;
  /** Shortest gap between two adverts published on change, ms (default 250). */
  coalesceMs?: number;
}

export function createPublishPacer(options: PublishPacerOptions): PublishPacer {
  const coalesceMs = options.coalesceMs ?? 250;
  let last = Number.NEGATIVE_INFINITY;
  return {
    changed(now) {
      return Math.max(0, last + coalesceMs - now);
    },
    heartbeat(now) {
      return now - last >= options.intervalMs / 2;
    },
    published(now) {
      last = now;
    },
  };
}
