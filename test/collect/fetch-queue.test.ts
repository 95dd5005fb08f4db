import { describe, expect, it } from 'vitest';
import { createFetchQueue } from '../../node/collector/fetch-queue.ts';
import type { SignedDigest } from '../../protocol/digest.ts';

const row = (origin: string, seq: number) => ({ origin, seq }) as SignedDigest;
const rows = (origin: string, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => row(origin, from + i));

/** A fetch that records each call and finishes only when the test releases it. */
function harness(concurrency: number, batch: number) {
  const calls: { origin: string; seqs: number[]; release(err?: Error): void }[] = [];
  const errors: unknown[] = [];
  const queue = createFetchQueue({
    concurrency,
    batch,
    fetch: (origin, list) =>
      new Promise<void>((resolve, reject) => {
        calls.push({
          origin,
          seqs: list.map((d) => d.seq),
          release: (err) => (err ? reject(err) : resolve()),
        });
      }),
    onError: (err) => errors.push(err),
  });
  const settle = () => new Promise((r) => setImmediate(r));
  return { queue, calls, errors, settle };
}

describe('the collector fetch queue', () => {
  it('coalesces rows that arrive while their origin is fetched into the next request', async () => {
    const { queue, calls, settle } = harness(4, 64);
    queue.add([row('a', 1)]);
    expect(calls.map((c) => c.seqs)).toEqual([[1]]);
    for (let seq = 2; seq <= 10; seq++) queue.add([row('a', seq)]);
    // One origin, one fetch in flight while fewer than a batch wait.
    expect(calls).toHaveLength(1);
    calls[0]!.release();
    await settle();
    expect(calls.map((c) => c.seqs)).toEqual([[1], [2, 3, 4, 5, 6, 7, 8, 9, 10]]);
    expect(queue.size()).toBe(9);
    calls[1]!.release();
    await queue.drained();
    expect(queue.size()).toBe(0);
  });

  it('fetches a backlog of one origin in parallel batches, never more than the concurrency', async () => {
    const { queue, calls, settle } = harness(3, 10);
    queue.add(rows('a', 1, 45));
    expect(calls.map((c) => c.seqs.length)).toEqual([10, 10, 10]);
    calls[0]!.release();
    await settle();
    expect(calls.map((c) => c.seqs.length)).toEqual([10, 10, 10, 10]);
    for (const c of calls.slice(1)) c.release();
    await settle();
    expect(calls.map((c) => c.seqs.length)).toEqual([10, 10, 10, 10, 5]);
    calls[4]!.release();
    await queue.drained();
    expect(new Set(calls.flatMap((c) => c.seqs)).size).toBe(45);
  });

  it('serves origins in turn, so one backlog does not starve another origin', async () => {
    const { queue, calls, settle } = harness(2, 5);
    queue.add(rows('a', 1, 50));
    queue.add([row('b', 1)]);
    // a's backlog took both slots; the first to free goes to b, which has none in flight.
    expect(calls.map((c) => c.origin)).toEqual(['a', 'a']);
    calls[0]!.release();
    await settle();
    expect(calls.map((c) => c.origin)).toEqual(['a', 'a', 'b']);
  });

  it('ignores a row already waiting or in flight', async () => {
    const { queue, calls, settle } = harness(1, 64);
    queue.add([row('a', 1), row('a', 2)]);
    queue.add([row('a', 1), row('a', 2), row('a', 3)]);
    expect(queue.size()).toBe(3);
    calls[0]!.release();
    await settle();
    expect(calls.map((c) => c.seqs)).toEqual([[1, 2], [3]]);
    calls[1]!.release();
    await queue.drained();
    // Once done, a row may be queued again (its body may still be pending after a failed fetch).
    queue.add([row('a', 1)]);
    expect(calls.at(-1)!.seqs).toEqual([1]);
  });

  it('reports a failed fetch and goes on with the rest', async () => {
    const { queue, calls, errors, settle } = harness(1, 2);
    queue.add(rows('a', 1, 4));
    calls[0]!.release(new Error('stream reset'));
    await settle();
    expect(errors.map((e) => (e as Error).message)).toEqual(['stream reset']);
    expect(calls).toHaveLength(2);
    calls[1]!.release();
    await queue.drained();
  });

  it('clear drops what waits; drained resolves once the fetches in flight end', async () => {
    const { queue, calls } = harness(1, 2);
    queue.add(rows('a', 1, 10));
    queue.clear();
    let drained = false;
    const d = queue.drained().then(() => {
      drained = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    calls[0]!.release();
    await d;
    expect(calls).toHaveLength(1);
  });
});
