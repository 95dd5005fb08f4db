// The advert's load split: a job whose samples all wait for a scoring slot is queued, not running
// (issue 12, build 7: `queued` was always 0). Pure accounting, driven through a real one-slot limiter.
import { describe, expect, it } from 'vitest';
import { isQueued, jobLoad, newActivity, trackScoring } from '../../node/worker/job-load.ts';

/** A limiter of `max` slots, like the executor's scoring limiter. */
function limiter(max: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    if (active >= max) await new Promise<void>((r) => waiting.push(r));
    active += 1;
    try {
      return await fn();
    } finally {
      active -= 1;
      waiting.shift()?.();
    }
  };
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('job load', () => {
  it('counts every admitted job once: queued + running = jobs', () => {
    const a = newActivity();
    const b = { generating: false, scoring: 0, waitingToScore: 2 };
    const c = { generating: false, scoring: 1, waitingToScore: 3 };
    const d = { generating: true, scoring: 0, waitingToScore: 4 };
    expect(jobLoad([a, b, c, d], 4)).toEqual({ queued: 1, running: 3, capacity: 4 });
    expect(jobLoad([], 2)).toEqual({ queued: 0, running: 0, capacity: 2 });
  });

  it('a job is queued only while everything it has left waits for a scoring slot', () => {
    expect(isQueued(newActivity())).toBe(false);
    expect(isQueued({ generating: false, scoring: 0, waitingToScore: 1 })).toBe(true);
    expect(isQueued({ generating: true, scoring: 0, waitingToScore: 1 })).toBe(false);
    expect(isQueued({ generating: false, scoring: 1, waitingToScore: 1 })).toBe(false);
    // Finished, about to report: nothing waits.
    expect(isQueued({ generating: false, scoring: 0, waitingToScore: 0 })).toBe(false);
  });

  it('two jobs, one scoring slot: the one waiting for the slot is queued until it gets it', async () => {
    const slot = limiter(1);
    const a = newActivity();
    const b = newActivity();
    const ga = gate();
    const gb = gate();
    const scoredA = trackScoring(a, slot, () => ga.opened.then(() => 'a'));
    a.generating = false;
    const scoredB = trackScoring(b, slot, () => gb.opened.then(() => 'b'));
    b.generating = false;
    await tick();
    expect([a, b]).toEqual([
      { generating: false, scoring: 1, waitingToScore: 0 },
      { generating: false, scoring: 0, waitingToScore: 1 },
    ]);
    expect(jobLoad([a, b], 2)).toEqual({ queued: 1, running: 1, capacity: 2 });
    ga.open();
    expect(await scoredA).toBe('a');
    await tick();
    expect(jobLoad([a, b], 2)).toEqual({ queued: 0, running: 2, capacity: 2 });
    gb.open();
    expect(await scoredB).toBe('b');
    expect(b).toEqual({ generating: false, scoring: 0, waitingToScore: 0 });
  });

  it('a failed score, or a slot that fails before it starts, leaves the counts right', async () => {
    const a = newActivity();
    await expect(
      trackScoring(a, limiter(1), () => Promise.reject(new Error('box could not be set up'))),
    ).rejects.toThrow(/box could not be set up/);
    expect(a).toEqual({ generating: true, scoring: 0, waitingToScore: 0 });
    const refusing = <T>(_fn: () => Promise<T>): Promise<T> => Promise.reject(new Error('aborted'));
    await expect(trackScoring(a, refusing, () => Promise.resolve(1))).rejects.toThrow(/aborted/);
    expect(a).toEqual({ generating: true, scoring: 0, waitingToScore: 0 });
  });
});
