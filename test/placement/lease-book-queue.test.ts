import { describe, expect, it } from 'vitest';
import { createLeaseBook, type LeaseBook } from '../../placement/lease-book.ts';
import { seededRandom } from '../../placement/seeded-random.ts';

const K = [0, 1, 2, 3];
const ids = (book: LeaseBook) => [...book.waiting()].map((w) => w.taskId);

describe('lease book queue (kept as states change)', () => {
  it('puts released work back at its place in the order of addition, and takes done work out', () => {
    const book = createLeaseBook();
    for (const t of ['a', 'b', 'c', 'd']) book.add(t, 'm', K);
    const b = book.lease('b', 'm', 'p', 0, 10)!;
    const c = book.lease('c', 'm', 'p', 0, 10)!;
    expect(ids(book)).toEqual(['a', 'd']);
    book.release(c.jobId, 'failed');
    book.release(b.jobId, 'busy');
    expect(ids(book)).toEqual(['a', 'b', 'c', 'd']);
    expect(book.pending().map((w) => w.taskId)).toEqual(['a', 'b', 'c', 'd']);
    const a = book.lease('a', 'm', 'p', 0, 10)!;
    for (const s of K) book.result(a.jobId, s);
    expect(ids(book)).toEqual(['b', 'c', 'd']);
    // A sample added later to done work queues it again, at its first place.
    book.add('a', 'm', [9]);
    expect(ids(book)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('lets the caller lease and release while it walks the queue', () => {
    const book = createLeaseBook();
    for (const t of ['a', 'b', 'c', 'd', 'e']) book.add(t, 'm', K);
    const seen: string[] = [];
    let aJob = '';
    for (const w of book.waiting()) {
      seen.push(w.taskId);
      const lease = book.lease(w.taskId, w.model, 'p', 0, 10)!;
      if (w.taskId === 'a') aJob = lease.jobId;
      // Released behind the walk: not seen again this walk.
      if (w.taskId === 'c') book.release(aJob, 'failed');
    }
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(ids(book)).toEqual(['a']);
  });

  it('keeps pending, waiting and outstanding equal to a recount from scratch under random operations', () => {
    for (const seed of [1, 2, 3]) {
      const rand = seededRandom(seed);
      const pick = <X>(xs: readonly X[]) => xs[Math.floor(rand() * xs.length)]!;
      const book = createLeaseBook({ maxAttempts: 4 });
      const peers = ['a', 'b', 'c'];
      const models = ['m1', 'm2'];
      const leased: string[] = [];
      let now = 0;
      for (let step = 0; step < 3000; step++) {
        now++;
        const r = rand();
        const pending = book.pending();
        if (r < 0.1) book.add(`t${Math.floor(rand() * 60)}`, pick(models), [Math.floor(rand() * 6)]);
        else if (r < 0.35 && pending.length > 0) {
          const w = pick(pending);
          const lease = book.lease(w.taskId, w.model, pick(peers), now, now + 30);
          if (lease) leased.push(lease.jobId);
        } else if (r < 0.45 && book.jobs().length > 0) {
          const job = pick(book.jobs());
          if (!job.backupOf) book.hedge(job.jobId, pick(peers), now, now + 30);
        } else if (r < 0.75 && leased.length > 0) {
          const jobId = pick(leased);
          const left = book.remaining(jobId);
          if (left.length > 0) book.result(jobId, pick(left));
        } else if (r < 0.85 && book.jobs().length > 0)
          book.release(pick(book.jobs()).jobId, pick(['refused', 'busy', 'failed', 'cancelled'] as const));
        else if (r < 0.9) book.disconnect(pick(peers));
        else book.expire(now);

        const recount = new Map<string, { jobs: number; models: string[] }>();
        for (const job of book.jobs()) {
          const e = recount.get(job.peerId) ?? { jobs: 0, models: [] };
          e.jobs++;
          if (!e.models.includes(job.model)) e.models.push(job.model);
          recount.set(job.peerId, e);
        }
        const sorted = (m: ReadonlyMap<string, { jobs: number; models: readonly string[] }>) =>
          [...m].map(([p, e]) => [p, e.jobs, [...e.models].sort()]).sort();
        expect(sorted(book.outstanding()), `seed ${seed} step ${step}`).toEqual(sorted(recount));
        const now2 = book.pending();
        expect([...book.waiting()]).toEqual(now2.map((w) => ({ taskId: w.taskId, model: w.model })));
        const running = new Set(book.jobs().map((j) => `${j.taskId}/${j.model}`));
        for (const w of now2) {
          expect(running.has(`${w.taskId}/${w.model}`)).toBe(false);
          expect(w.samples.length).toBeGreaterThan(0);
        }
        expect(now2.reduce((n, w) => n + w.samples.length, 0)).toBeLessThanOrEqual(book.stats().pending);
      }
    }
  });
});
