// The program's one semaphore (node/async/semaphore.ts): FIFO, abortable waits, release on error,
// and never more holders than permits, however releases and new callers interleave.
import { describe, expect, it } from 'vitest';
import { createSemaphore, limiter, withPermit } from '../../node/async/semaphore.ts';
import { AbortedError } from '../../node/models/errors.ts';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await Promise.resolve();
};

describe('createSemaphore', () => {
  it('grants permits up to its count, then queues callers and serves them in order', async () => {
    const s = createSemaphore(2);
    const order: string[] = [];
    const r1 = await s.acquire();
    const r2 = await s.acquire();
    expect([s.running, s.waiting, s.permits]).toEqual([2, 0, 2]);
    const waits = ['a', 'b', 'c'].map((name) =>
      s.acquire().then((release) => {
        order.push(name);
        return release;
      }),
    );
    await turns(5);
    expect(order).toEqual([]);
    expect(s.waiting).toBe(3);
    r1();
    const ra = await waits[0]!;
    r2();
    const rb = await waits[1]!;
    expect(order).toEqual(['a', 'b']);
    expect([s.running, s.waiting]).toEqual([2, 1]);
    ra();
    const rc = await waits[2]!;
    expect(order).toEqual(['a', 'b', 'c']);
    rb();
    rc();
    expect([s.running, s.waiting]).toEqual([0, 0]);
  });

  it('a release function works once: calling it again frees nothing more', async () => {
    const s = createSemaphore(1);
    const r = await s.acquire();
    r();
    r();
    expect(s.running).toBe(0);
    const again = await s.acquire();
    expect(s.running).toBe(1);
    again();
  });

  it('an abort while waiting rejects with AbortedError, leaves the queue, and releases nothing', async () => {
    const s = createSemaphore(1);
    const held = await s.acquire();
    const abort = new AbortController();
    const waiting = s.acquire(abort.signal);
    const behind = s.acquire();
    expect(s.waiting).toBe(2);
    abort.abort();
    await expect(waiting).rejects.toBeInstanceOf(AbortedError);
    expect([s.running, s.waiting]).toEqual([1, 1]);
    held();
    const next = await behind;
    expect([s.running, s.waiting]).toEqual([1, 0]);
    next();
    expect(s.running).toBe(0);
  });

  it('an already aborted signal rejects at once, even with a permit free', async () => {
    const s = createSemaphore(1);
    await expect(s.acquire(AbortSignal.abort())).rejects.toBeInstanceOf(AbortedError);
    expect([s.running, s.waiting]).toEqual([0, 0]);
  });

  it('an abort after the permit was granted does nothing', async () => {
    const s = createSemaphore(1);
    const abort = new AbortController();
    const r = await s.acquire(abort.signal);
    abort.abort();
    expect(s.running).toBe(1);
    r();
    expect(s.running).toBe(0);
  });
});

describe('withPermit and limiter', () => {
  it('release on error: a rejecting or throwing fn gives its permit back', async () => {
    const s = createSemaphore(1);
    await expect(withPermit(s, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(s.running).toBe(0);
    await expect(
      withPermit(s, () => {
        throw new Error('sync boom');
      }),
    ).rejects.toThrow('sync boom');
    expect(s.running).toBe(0);
    expect(await withPermit(s, async () => 7)).toBe(7);
  });

  it('an abort while waiting: fn never runs and nothing is released', async () => {
    const s = createSemaphore(1);
    const g = gate();
    const first = withPermit(s, () => g.opened);
    const abort = new AbortController();
    let ran = false;
    const second = withPermit(
      s,
      async () => {
        ran = true;
      },
      abort.signal,
    );
    abort.abort();
    await expect(second).rejects.toBeInstanceOf(AbortedError);
    expect([s.running, s.waiting]).toEqual([1, 0]);
    g.open();
    await first;
    expect(ran).toBe(false);
    expect(s.running).toBe(0);
  });

  // Regression: the executor's hand-written limiter let a caller arriving between a release and the
  // woken waiter's resumption take the freed slot, and then the waiter took it too.
  it('never more holders than permits, whatever the interleaving of releases and new callers', async () => {
    for (let delay = 0; delay < 12; delay++) {
      const limit = limiter(2);
      let active = 0;
      let most = 0;
      const hold = (g: Promise<void>) =>
        limit(async () => {
          active++;
          most = Math.max(most, active);
          await g;
          active--;
        });
      const gates = [gate(), gate(), gate(), gate(), gate()];
      const runs = gates.slice(0, 4).map((g) => hold(g.opened));
      await turns(3);
      // Two hold the permits, two wait; both holders finish, and a fifth caller comes a few turns later.
      gates[0]!.open();
      gates[1]!.open();
      const late = turns(delay).then(() => hold(gates[4]!.opened));
      await turns(20);
      for (const g of gates) g.open();
      await Promise.all([...runs, late]);
      expect(most, `fifth caller after ${delay} turns`).toBeLessThanOrEqual(2);
    }
  });

  it('limiter serves callers in arrival order', async () => {
    const limit = limiter(1);
    const order: number[] = [];
    await Promise.all(
      [0, 1, 2, 3, 4].map((i) =>
        limit(async () => {
          order.push(i);
          await turns(2);
        }),
      ),
    );
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });
});

describe('createSemaphore, several permits at once (an n-request holds one per choice)', () => {
  it('takes count permits at once, releases them together, and caps count at the permits', async () => {
    const s = createSemaphore(4);
    const r3 = await s.acquire(undefined, 3);
    expect(s.running).toBe(3);
    const r1 = await s.acquire();
    expect(s.running).toBe(4);
    r3();
    r3(); // a second release frees nothing
    expect(s.running).toBe(1);
    r1();
    const all = await s.acquire(undefined, 99);
    expect(s.running).toBe(4);
    all();
    expect(s.running).toBe(0);
  });

  it('serves waiters in order: a large request is not overtaken by small ones behind it', async () => {
    const s = createSemaphore(3);
    const held = await s.acquire(undefined, 2);
    const order: string[] = [];
    const big = s.acquire(undefined, 3).then((r) => {
      order.push('big');
      return r;
    });
    const small = s.acquire().then((r) => {
      order.push('small');
      return r;
    });
    await turns(5);
    expect(order).toEqual([]); // one permit is free, but the big one is first in line
    held();
    const rBig = await big;
    expect(order).toEqual(['big']);
    rBig();
    (await small)();
    expect(order).toEqual(['big', 'small']);
    expect(s.running).toBe(0);
  });

  it('a waiter that gives up lets the ones behind it in when they fit', async () => {
    const s = createSemaphore(2);
    const held = await s.acquire();
    const gone = new AbortController();
    const big = s.acquire(gone.signal, 2);
    const small = s.acquire();
    gone.abort();
    await expect(big).rejects.toBeInstanceOf(AbortedError);
    const rSmall = await small;
    expect(s.running).toBe(2);
    rSmall();
    held();
    expect([s.running, s.waiting]).toEqual([0, 0]);
  });
});
