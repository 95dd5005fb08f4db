import { AbortedError } from '../models/errors.ts';

/** A counting semaphore with a FIFO wait queue and abortable waits. */
export interface Semaphore {
  /** Waits for a permit; resolves to its release function. Rejects with AbortedError if `signal` fires first. */
  acquire(signal?: AbortSignal): Promise<() => void>;
  /** Permits in use. */
  readonly running: number;
  /** Callers waiting for a permit. */
  readonly waiting: number;
  /** Total permits. */
  readonly permits: number;
}

export function createSemaphore(permits: number): Semaphore {
  let running = 0;
  const queue: { grant: () => void }[] = [];
  const releaser = () => {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      running--;
      const next = queue.shift();
      if (next) next.grant();
    };
  };
  return {
    acquire(signal) {
      if (signal?.aborted) return Promise.reject(new AbortedError());
      if (running < permits && queue.length === 0) {
        running++;
        return Promise.resolve(releaser());
      }
      return new Promise((resolve, reject) => {
        const entry = {
          grant: () => {
            signal?.removeEventListener('abort', onAbort);
            running++;
            resolve(releaser());
          },
        };
        const onAbort = () => {
          const i = queue.indexOf(entry);
          if (i >= 0) queue.splice(i, 1);
          reject(new AbortedError());
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
