// The program's one sleep (node/async/sleep.ts): waits, aborts (rejecting, or ending early with
// `pause`), leaves no listener on the signal and no timer behind.
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { pause, sleep } from '../../node/async/sleep.ts';
import { AbortedError } from '../../node/models/errors.ts';

describe('sleep', () => {
  it('waits about ms', async () => {
    const t0 = performance.now();
    await sleep(30);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(29);
  });

  it('ms <= 0 (or NaN) does not wait for a timer', async () => {
    for (const ms of [0, -5, Number.NaN]) {
      let timerFired = false;
      const timer = setTimeout(() => {
        timerFired = true;
      }, 0);
      await sleep(ms);
      expect(timerFired).toBe(false);
      clearTimeout(timer);
    }
  });

  it('rejects with AbortedError when the signal fires, or has fired', async () => {
    const abort = new AbortController();
    const t0 = performance.now();
    const waiting = sleep(60_000, abort.signal);
    setTimeout(() => abort.abort(), 10);
    await expect(waiting).rejects.toBeInstanceOf(AbortedError);
    expect(performance.now() - t0).toBeLessThan(5000);
    await expect(sleep(10, AbortSignal.abort())).rejects.toBeInstanceOf(AbortedError);
    await expect(sleep(0, AbortSignal.abort())).rejects.toBeInstanceOf(AbortedError);
  });

  it('leaves no listener on a long-lived signal, however many times it is used', async () => {
    const abort = new AbortController();
    for (let i = 0; i < 30; i++) await sleep(1, abort.signal);
    for (let i = 0; i < 30; i++) await pause(1, abort.signal);
    expect(getEventListeners(abort.signal, 'abort')).toHaveLength(0);
  });
});

describe('pause', () => {
  it('true when the whole time passed, false when the signal ended it early', async () => {
    expect(await pause(5)).toBe(true);
    expect(await pause(5, new AbortController().signal)).toBe(true);
    const abort = new AbortController();
    const waiting = pause(60_000, abort.signal);
    setTimeout(() => abort.abort(new Error('stop')), 10);
    expect(await waiting).toBe(false);
    expect(await pause(60_000, AbortSignal.abort())).toBe(false);
  });
});
