import { setTimeout as wait } from 'node:timers/promises';
import { AbortedError } from '../models/errors.ts';

/**
 * The program's one sleep (node:timers/promises underneath): waits `ms`; rejects with AbortedError
 * if `signal` fires first (or has fired). `ms <= 0` does not wait at all (no timer, no turn of the
 * event loop). The timer does not hold the process open past an abort, and no listener stays on
 * `signal` once it is over.
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) throw new AbortedError();
  if (!(ms > 0)) return;
  try {
    await wait(ms, undefined, signal ? { signal } : undefined);
  } catch (err) {
    if (signal?.aborted) throw new AbortedError();
    throw err;
  }
}

/** `sleep`, but an abort ends the wait early instead of rejecting: true when the whole time passed. */
export async function pause(ms: number, signal?: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, signal);
    return true;
  } catch (err) {
    if (err instanceof AbortedError && signal?.aborted) return false;
    throw err;
  }
}
