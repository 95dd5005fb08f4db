// The one polling loop of the test helpers (cli.ts `eventually`, drill-fleet.ts `poll`, collect/helpers.ts
// `until`, fake-worker.ts `until` are its callers with their own defaults): bounded, and on timeout it says
// what it last saw, so a red CI run names the count that fell short instead of only "timed out".
import { inspect } from 'node:util';
import { sleep } from '../../node/async/sleep.ts';

/** What a check saw when it was not yet met: return `notYet(seen)` instead of null/false to have it reported. */
export class NotYet {
  readonly seen: unknown;
  constructor(seen: unknown) {
    this.seen = seen;
  }
}

/** Thrown by a check that knows the wait is hopeless (the process exited): the poll rethrows it at once. */
export class GiveUp extends Error {}

/** A check's "not yet", carrying what it saw (a count, a status, a summary string). */
export const notYet = (seen: unknown): NotYet => new NotYet(seen);

/** A check's result: the value waited for, or not yet (falsy, a NotYet, or a throw). */
export type Checked<T> = T | NotYet | null | undefined | false;

export interface PollOptions {
  /** What is waited for, in the timeout message ("collector 1 complete"). */
  what: string;
  /** Longest wait, ms. */
  timeoutMs: number;
  /** Pause between tries, ms. */
  pauseMs: number;
}

/** A short one-line rendering of what a check saw. */
export function describeSeen(seen: unknown): string {
  if (typeof seen === 'string') return seen.length > 2000 ? `${seen.slice(0, 2000)}…` : seen;
  return inspect(seen, {
    depth: 4,
    breakLength: Number.POSITIVE_INFINITY,
    maxArrayLength: 30,
    maxStringLength: 300,
  });
}

/** The timeout message: what was waited for, what the check last returned, and the last error it threw. */
function timeoutMessage(o: PollOptions, tries: number, last: { value?: unknown; error?: unknown }): string {
  const parts = [`timed out after ${o.timeoutMs} ms (${tries} tries) waiting for ${o.what}`];
  if ('value' in last)
    parts.push(
      `last saw: ${last.value instanceof NotYet ? describeSeen(last.value.seen) : describeSeen(last.value)}`,
    );
  if (last.error !== undefined)
    parts.push(`last error: ${last.error instanceof Error ? last.error.message : describeSeen(last.error)}`);
  return parts.join('; ');
}

/**
 * Calls `check` until it returns a truthy value other than a NotYet (which it returns), at least once and
 * once more at the deadline; a throw counts as not yet, except GiveUp (rethrown at once). On timeout it
 * throws, naming what it last saw.
 */
export async function pollFor<T>(check: () => Checked<T> | Promise<Checked<T>>, o: PollOptions): Promise<T> {
  const deadline = Date.now() + o.timeoutMs;
  const last: { value?: unknown; error?: unknown } = {};
  for (let tries = 1; ; tries++) {
    try {
      const v = await check();
      if (v && !(v instanceof NotYet)) return v as T;
      last.value = v;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      last.error = err;
    }
    if (Date.now() >= deadline) throw new Error(timeoutMessage(o, tries, last));
    await sleep(Math.min(o.pauseMs, Math.max(0, deadline - Date.now())));
  }
}
