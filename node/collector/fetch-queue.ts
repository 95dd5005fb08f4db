import type { SignedDigest } from '../../protocol/digest.ts';

export interface FetchQueueOptions {
  /** Fetches at once, over every origin (parallel streams). */
  concurrency: number;
  /** Most rows one fetch asks for (one request frame). */
  batch: number;
  /** Fetches the bodies of rows of one origin; a rejection is logged by the caller, never retried here. */
  fetch(origin: string, rows: SignedDigest[]): Promise<void>;
  /** Called with what a fetch threw (the rows stay pending in the store for the next catch-up). */
  onError(err: unknown): void;
}

/** Body fetches waiting and in flight, rows coalesced per origin. */
export interface FetchQueue {
  /** Queues rows whose bodies are wanted (rows already queued or in flight are ignored). */
  add(rows: Iterable<SignedDigest>): void;
  /** Resolves once nothing is queued or in flight. */
  drained(): Promise<void>;
  /** Rows queued or in flight. */
  size(): number;
  /** Drops what is queued (fetches in flight finish); drained() then resolves once they have. */
  clear(): void;
}

const rowKey = (d: { origin: string; seq: number }) => `${d.origin}#${d.seq}`;

/**
 * Written here rather than with a generic queue (p-queue and the like run the tasks they are given):
 * the product's point is coalescing. Rows that arrive while an origin's fetch is in flight wait and
 * leave together in the next request, so a busy collector asks for up to `batch` bodies per round
 * trip instead of one request per gossip flush, and a second fetch of the same origin starts only
 * when a full batch waits (a backlog after a restart is fetched in parallel).
 */
export function createFetchQueue(options: FetchQueueOptions): FetchQueue {
  const concurrency = Math.max(1, options.concurrency);
  const batch = Math.max(1, options.batch);
  /** origin → rows waiting, in arrival order. */
  const waiting = new Map<string, Map<string, SignedDigest>>();
  const inFlight = new Set<string>();
  /** origin → fetches of it in flight. */
  const running = new Map<string, number>();
  let active = 0;
  let waiters: (() => void)[] = [];

  const idle = () => active === 0 && waiting.size === 0;
  const settle = () => {
    if (!idle()) return;
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };

  /**
   * The next origin to fetch from: of those with rows waiting and either no fetch in flight or a full
   * batch waiting, the one with the fewest fetches in flight (so one origin's backlog cannot take
   * every slot from the others); ties go to the origin queued first.
   */
  const nextOrigin = (): string | null => {
    let best: string | null = null;
    let bestRunning = Number.POSITIVE_INFINITY;
    for (const [origin, rows] of waiting) {
      const n = running.get(origin) ?? 0;
      if ((n === 0 || rows.size >= batch) && n < bestRunning) {
        best = origin;
        bestRunning = n;
      }
    }
    return best;
  };

  const take = (origin: string): SignedDigest[] => {
    const rows = waiting.get(origin)!;
    const out: SignedDigest[] = [];
    for (const [key, d] of rows) {
      if (out.length >= batch) break;
      rows.delete(key);
      inFlight.add(key);
      out.push(d);
    }
    if (rows.size === 0) waiting.delete(origin);
    return out;
  };

  const start = (origin: string) => {
    const rows = take(origin);
    active++;
    running.set(origin, (running.get(origin) ?? 0) + 1);
    void options
      .fetch(origin, rows)
      .catch(options.onError)
      .finally(() => {
        active--;
        const left = (running.get(origin) ?? 1) - 1;
        if (left === 0) running.delete(origin);
        else running.set(origin, left);
        for (const d of rows) inFlight.delete(rowKey(d));
        pump();
        settle();
      });
  };

  const pump = () => {
    while (active < concurrency) {
      const origin = nextOrigin();
      if (origin === null) return;
      start(origin);
    }
  };

  return {
    add(rows) {
      for (const d of rows) {
        const key = rowKey(d);
        if (inFlight.has(key)) continue;
        const list = waiting.get(d.origin) ?? new Map<string, SignedDigest>();
        list.set(key, d);
        waiting.set(d.origin, list);
      }
      pump();
    },
    drained() {
      if (idle()) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    size() {
      let n = inFlight.size;
      for (const rows of waiting.values()) n += rows.size;
      return n;
    },
    clear() {
      waiting.clear();
      settle();
    },
  };
}
