import { AbortedError } from '../models/errors.ts';

/** A counting semaphore with a FIFO wait queue and abortable waits. */
export interface Semaphore {
  /**
   * Waits for `count` permits (default 1, at most all of them), taken at once in FIFO order; resolves to
   * their release function. Rejects with AbortedError if `signal` fires first.
   */
  acquire(signal?: AbortSignal, count?: number): Promise<() => void>;
  /** Permits in use. */
  readonly running: number;
  /** Callers waiting for a permit. */
  readonly waiting: number;
  /** Total permits. */
  readonly permits: number;
}

export function createSemaphore(permits: number): Semaphore {
  let running = 0;
  const queue: { need: number; grant: () => void }[] = [];
  /** Grants waiters in order while the first one's permits are free (a large request is never overtaken). */
  const drain = () => {
    while (queue.length > 0 && running + queue[0]!.need <= permits) queue.shift()!.grant();
  };
  const releaser = (need: number) => {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      running -= need;
      drain();
    };
  };
  return {
    acquire(signal, count = 1) {
      if (signal?.aborted) return Promise.reject(new AbortedError());
      const need = Math.max(1, Math.min(Math.floor(count), permits));
      if (running + need <= permits && queue.length === 0) {
        running += need;
        return Promise.resolve(releaser(need));
      }
      return new Promise((resolve, reject) => {
        const entry = {
          need,
          grant: () => {
            signal?.removeEventListener('abort', onAbort);
            running += need;
            resolve(releaser(need));
          },
        };
        const onAbort = () => {
          const i = queue.indexOf(entry);
          if (i >= 0) queue.splice(i, 1);
          reject(new AbortedError());
          drain(); // the ones behind it may fit now
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        queue.push(entry);
      });
    },
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
    get permits() {
      return permits;
    },
  };
}

/**
 * Runs `fn` holding a permit of `semaphore`, released when `fn` settles (resolved or rejected, or
 * thrown synchronously). Rejects with AbortedError, holding and releasing nothing, if `signal` fires
 * while waiting for the permit.
 */
export async function withPermit<T>(
  semaphore: Semaphore,
  fn: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const release = await semaphore.acquire(signal);
  try {
    return await fn();
  } finally {
    release();
  }
}

/** A semaphore of `permits` as a function: `limit(fn, signal?)` runs `fn` through `withPermit`. */
export function limiter(permits: number): <T>(fn: () => Promise<T>, signal?: AbortSignal) => Promise<T> {
  const semaphore = createSemaphore(permits);
  return (fn, signal) => withPermit(semaphore, fn, signal);
}
