import { describe, expect, it } from 'vitest';
import { createLeaseBook, type LeaseBook } from '../../placement/lease-book.ts';
import { seededRandom } from '../../placement/seeded-random.ts';

const K = [0, 1, 2, 3, 4, 5, 6, 7];

function consistent(book: LeaseBook) {
  const s = book.stats();
  expect(s.pending + s.leased + s.done + s.exhausted).toBe(s.planned);
  return s;
}

describe('lease book', () => {
  it('rejects bad options and bad sample indices', () => {
    expect(() => createLeaseBook({ maxAttempts: 0 })).toThrow(/maxAttempts/);
    expect(() => createLeaseBook({ maxAttempts: 1.5 })).toThrow(/maxAttempts/);
    const book = createLeaseBook();
    expect(() => book.add('t', 'm', [-1])).toThrow(/sample index/);
    expect(() => book.add('t', 'm', [0.5])).toThrow(/sample index/);
    book.add('t', 'm', [0]);
    expect(() => book.lease('t', 'm', 'a', Number.NaN, 10)).toThrow(/now/);
  });

  it('leases all k samples of a task as one job and completes it', () => {
    const book = createLeaseBook();
    expect(book.add('t1', 'm', K)).toBe(8);
    expect(book.add('t1', 'm', [0, 1, 8])).toBe(1); // only the new index counts
    expect(book.pending()).toEqual([{ taskId: 't1', model: 'm', samples: [...K, 8], attempts: 0 }]);
    const lease = book.lease('t1', 'm', 'peerA', 100, 1100)!;
    expect(lease).toMatchObject({
      jobId: 't1#m#1',
      attempt: 1,
      peerId: 'peerA',
      samples: [...K, 8],
      deadline: 1100,
    });
    expect(book.lease('t1', 'm', 'peerB', 100, 1100)).toBeNull(); // one active job per (task, model)
    expect(book.pending()).toEqual([]);
    expect(book.outstanding()).toEqual(new Map([['peerA', { jobs: 1, generating: 1, models: ['m'] }]]));
    expect(consistent(book)).toMatchObject({ planned: 9, leased: 9, activeJobs: 1 });
    for (const s of [...K, 8].slice(0, -1))
      expect(book.result(lease.jobId, s)).toEqual({ status: 'accepted', jobDone: false, otherJobDone: null });
    expect(book.result(lease.jobId, 3).status).toBe('duplicate');
    expect(book.remaining(lease.jobId)).toEqual([8]);
    expect(book.result(lease.jobId, 8)).toEqual({ status: 'accepted', jobDone: true, otherJobDone: null });
    expect(book.complete).toBe(true);
    expect(book.jobs()).toEqual([]);
    expect(book.outstanding().size).toBe(0);
    expect(consistent(book)).toMatchObject({ done: 9, leased: 0, pending: 0 });
  });

  it('reports unknown jobs and samples the job was not asked for', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0, 1]);
    const lease = book.lease('t', 'm', 'a', 0, 10)!;
    expect(book.result('nope', 0).status).toBe('unknown-job');
    expect(book.result(lease.jobId, 5).status).toBe('not-in-job');
    expect(consistent(book).done).toBe(0);
  });

  it('on disconnect re-places only the unfinished samples', () => {
    const book = createLeaseBook();
    book.add('t1', 'm', K);
    book.add('t2', 'm', K);
    const j1 = book.lease('t1', 'm', 'a', 0, 1000)!;
    const j2 = book.lease('t2', 'm', 'b', 0, 1000)!;
    for (const s of [0, 1, 2]) book.result(j1.jobId, s);
    const released = book.disconnect('a');
    expect(released).toEqual([
      {
        jobId: j1.jobId,
        taskId: 't1',
        model: 'm',
        peerId: 'a',
        cause: 'disconnected',
        samples: [3, 4, 5, 6, 7],
        exhausted: [],
      },
    ]);
    expect(book.disconnect('a')).toEqual([]);
    expect(book.job(j2.jobId)).toBeDefined();
    expect(book.pending()).toEqual([{ taskId: 't1', model: 'm', samples: [3, 4, 5, 6, 7], attempts: 1 }]);
    const again = book.lease('t1', 'm', 'c', 10, 2000)!;
    expect(again.jobId).toBe('t1#m#2');
    expect(again.samples).toEqual([3, 4, 5, 6, 7]);
    expect(consistent(book)).toMatchObject({ done: 3, leased: 13, pending: 0 });
  });

  it('re-places on refusal and remembers who refused or failed', () => {
    const book = createLeaseBook();
    book.add('t', 'm', K);
    const j = book.lease('t', 'm', 'a', 0, 10)!;
    expect(book.release(j.jobId, 'refused')?.samples).toEqual(K);
    expect(book.release(j.jobId, 'refused')).toBeNull();
    const j2 = book.lease('t', 'm', 'b', 0, 10)!;
    book.release(j2.jobId, 'failed');
    const j3 = book.lease('t', 'm', 'c', 0, 10)!;
    book.release(j3.jobId, 'deadline');
    expect(book.refusedBy('t', 'm')).toEqual(['a', 'b']);
    expect(book.refusedBy('t', 'other')).toEqual([]);
  });

  it('expires jobs at their deadline, and extend moves a deadline', () => {
    const book = createLeaseBook();
    book.add('t1', 'm', [0, 1]);
    book.add('t2', 'm', [0, 1]);
    const j1 = book.lease('t1', 'm', 'a', 0, 100)!;
    const j2 = book.lease('t2', 'm', 'b', 0, 200)!;
    expect(book.nextDeadline()).toBe(100);
    expect(book.expire(99)).toEqual([]);
    expect(book.extend(j1.jobId, 300)).toBe(true);
    expect(book.extend('nope', 300)).toBe(false);
    expect(book.nextDeadline()).toBe(200);
    const out = book.expire(200);
    expect(out.map((r) => [r.jobId, r.cause, r.samples])).toEqual([[j2.jobId, 'deadline', [0, 1]]]);
    expect(book.expire(300).map((r) => r.jobId)).toEqual([j1.jobId]);
    expect(book.nextDeadline()).toBeNull();
  });

  it('counts a late result from an ended lease once, and the re-placed job then skips it', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0, 1, 2]);
    const j1 = book.lease('t', 'm', 'a', 0, 100)!;
    book.result(j1.jobId, 0);
    book.expire(100);
    const j2 = book.lease('t', 'm', 'b', 100, 200)!;
    expect(j2.samples).toEqual([1, 2]);
    // The slow node delivers sample 1 after all: valid work, counted once.
    expect(book.result(j1.jobId, 1)).toEqual({ status: 'accepted', jobDone: false, otherJobDone: null });
    expect(book.remaining(j2.jobId)).toEqual([2]);
    expect(book.result(j2.jobId, 1).status).toBe('duplicate');
    // The late node also delivers sample 2, which finishes j2.
    expect(book.result(j1.jobId, 2)).toEqual({ status: 'accepted', jobDone: false, otherJobDone: j2.jobId });
    expect(book.complete).toBe(true);
    expect(consistent(book).done).toBe(3);
  });

  it('accepts a late result for pending work, so it is not placed again', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0, 1]);
    const j1 = book.lease('t', 'm', 'a', 0, 100)!;
    book.disconnect('a');
    expect(book.result(j1.jobId, 0).status).toBe('accepted');
    expect(book.pending()).toEqual([{ taskId: 't', model: 'm', samples: [1], attempts: 1 }]);
  });

  it('gives up a (task, model) after maxAttempts placements', () => {
    const book = createLeaseBook({ maxAttempts: 2 });
    book.add('t', 'm', [0, 1, 2]);
    const j1 = book.lease('t', 'm', 'a', 0, 10)!;
    book.result(j1.jobId, 0);
    expect(book.release(j1.jobId, 'failed')).toMatchObject({ samples: [1, 2], exhausted: [] });
    const j2 = book.lease('t', 'm', 'b', 0, 10)!;
    expect(book.release(j2.jobId, 'failed')).toMatchObject({ samples: [], exhausted: [1, 2] });
    expect(book.pending()).toEqual([]);
    expect(book.lease('t', 'm', 'c', 0, 10)).toBeNull();
    expect(book.complete).toBe(true);
    expect(consistent(book)).toMatchObject({ done: 1, exhausted: 2 });
    // A result that turns up afterwards still counts, once.
    expect(book.result(j2.jobId, 1).status).toBe('accepted');
    expect(consistent(book)).toMatchObject({ done: 2, exhausted: 1 });
  });

  it('a busy node is back-pressure: no exclusion, no attempt used up', () => {
    const book = createLeaseBook({ maxAttempts: 1 });
    book.add('t', 'm', [0, 1]);
    for (let i = 0; i < 5; i++) {
      const j = book.lease('t', 'm', 'a', 0, 10)!;
      expect(book.release(j.jobId, 'busy')).toMatchObject({ samples: [0, 1], exhausted: [] });
    }
    expect(book.refusedBy('t', 'm')).toEqual([]);
    const last = book.lease('t', 'm', 'a', 0, 10)!;
    expect(last.jobId).toBe('t#m#6');
    // The one real attempt allowed is still there: its failure gives the samples up.
    expect(book.release(last.jobId, 'failed')).toMatchObject({ samples: [], exhausted: [0, 1] });
    expect(book.refusedBy('t', 'm')).toEqual(['a']);
  });

  it('resumes after a restart with only the unfinished samples and fresh job ids', () => {
    const book = createLeaseBook({ maxAttempts: 3 });
    expect(() => book.add('t', 'm', [0], -1)).toThrow(/previousAttempts/);
    expect(book.add('t', 'm', [5, 6, 7], 2)).toBe(3);
    expect(book.pending()).toEqual([{ taskId: 't', model: 'm', samples: [5, 6, 7], attempts: 2 }]);
    const j = book.lease('t', 'm', 'a', 0, 10)!;
    expect(j.jobId).toBe('t#m#3');
    // This was the last attempt allowed.
    expect(book.release(j.jobId, 'disconnected')).toMatchObject({ samples: [], exhausted: [5, 6, 7] });
  });

  it('keeps models of one task apart', () => {
    const book = createLeaseBook();
    book.add('t', 'm1', [0, 1]);
    book.add('t', 'm2', [0, 1]);
    const a = book.lease('t', 'm1', 'a', 0, 10)!;
    const b = book.lease('t', 'm2', 'a', 0, 10)!;
    expect(a.jobId).not.toBe(b.jobId);
    expect(book.outstanding().get('a')).toEqual({ jobs: 2, generating: 2, models: ['m1', 'm2'] });
    expect(book.result(a.jobId, 0).status).toBe('accepted');
    expect(book.result(b.jobId, 0).status).toBe('accepted');
  });

  it('waits for an active job before leasing samples added meanwhile', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0]);
    const j = book.lease('t', 'm', 'a', 0, 10)!;
    book.add('t', 'm', [1]);
    expect(book.pending()).toEqual([]);
    book.result(j.jobId, 0);
    expect(book.pending()).toEqual([{ taskId: 't', model: 'm', samples: [1], attempts: 1 }]);
  });

  describe('backups (hedge)', () => {
    it('runs the unfinished samples on a second peer; the first result of each counts, and the last one ends both jobs', () => {
      const book = createLeaseBook();
      book.add('t', 'm', [0, 1, 2]);
      const job = book.lease('t', 'm', 'slow', 0, 100)!;
      expect(book.result(job.jobId, 0)).toMatchObject({ status: 'accepted' });
      const backup = book.hedge(job.jobId, 'fast', 10, 110)!;
      expect(backup).toMatchObject({ jobId: 't#m#2', peerId: 'fast', samples: [1, 2], backupOf: job.jobId });
      expect(book.remaining(backup.jobId)).toEqual([1, 2]);
      expect(book.outstanding()).toEqual(
        new Map([
          ['slow', { jobs: 1, generating: 1, models: ['m'] }],
          ['fast', { jobs: 1, generating: 1, models: ['m'] }],
        ]),
      );
      expect(consistent(book)).toMatchObject({ leased: 2, done: 1, activeJobs: 2 });
      expect(book.result(backup.jobId, 1)).toEqual({
        status: 'accepted',
        jobDone: false,
        otherJobDone: null,
      });
      expect(book.remaining(job.jobId)).toEqual([2]);
      // The job's own late result for a sample its backup did is a duplicate.
      expect(book.result(job.jobId, 1).status).toBe('duplicate');
      expect(book.result(backup.jobId, 2)).toEqual({
        status: 'accepted',
        jobDone: true,
        otherJobDone: job.jobId,
      });
      expect(book.jobs()).toEqual([]);
      expect(book.complete).toBe(true);
      expect(consistent(book)).toMatchObject({ done: 3, leased: 0 });
    });

    it('the job finishing first ends its backup', () => {
      const book = createLeaseBook();
      book.add('t', 'm', [0, 1]);
      const job = book.lease('t', 'm', 'a', 0, 100)!;
      const backup = book.hedge(job.jobId, 'b', 0, 100)!;
      book.result(job.jobId, 0);
      expect(book.result(job.jobId, 1)).toEqual({
        status: 'accepted',
        jobDone: true,
        otherJobDone: backup.jobId,
      });
      expect(book.jobs()).toEqual([]);
    });

    it('a job that fails or lapses hands its samples to its backup: nothing is placed again, no attempt is used', () => {
      const book = createLeaseBook({ maxAttempts: 1 });
      book.add('t', 'm', [0, 1]);
      const job = book.lease('t', 'm', 'hole', 0, 100)!;
      const backup = book.hedge(job.jobId, 'b', 50, 1000)!;
      expect(book.expire(100)).toEqual([
        {
          jobId: job.jobId,
          taskId: 't',
          model: 'm',
          peerId: 'hole',
          cause: 'deadline',
          samples: [],
          exhausted: [],
        },
      ]);
      expect(book.pending()).toEqual([]);
      expect(book.job(backup.jobId)?.backupOf).toBeUndefined(); // it is the job now
      expect(book.remaining(backup.jobId)).toEqual([0, 1]);
      expect(consistent(book)).toMatchObject({ leased: 2, exhausted: 0 });
      // It can be backed up in turn, and with maxAttempts 1 its own failure still re-places (the backup was free).
      expect(book.hedge(backup.jobId, 'c', 60, 1000)).not.toBeNull();
      book.release(backup.jobId, 'failed');
      expect(book.jobs().map((j) => j.peerId)).toEqual(['c']);
    });

    it('a backup that fails or lapses leaves the job alone', () => {
      const book = createLeaseBook({ maxAttempts: 1 });
      book.add('t', 'm', [0, 1]);
      const job = book.lease('t', 'm', 'a', 0, 1000)!;
      const backup = book.hedge(job.jobId, 'b', 0, 10)!;
      expect(book.expire(10)).toMatchObject([{ jobId: backup.jobId, samples: [], exhausted: [] }]);
      expect(book.remaining(job.jobId)).toEqual([0, 1]);
      expect(book.pending()).toEqual([]);
      // The job may be backed up again, and when it fails alone its single attempt is used up.
      expect(book.hedge(job.jobId, 'c', 20, 1000)).not.toBeNull();
      book.disconnect('c');
      expect(book.release(job.jobId, 'failed')).toMatchObject({ samples: [], exhausted: [0, 1] });
      expect(consistent(book)).toMatchObject({ exhausted: 2, leased: 0 });
    });

    it('is refused for an unknown or finished job, a backup, a second backup, the same peer', () => {
      const book = createLeaseBook();
      book.add('t', 'm', [0]);
      const job = book.lease('t', 'm', 'a', 0, 100)!;
      expect(book.hedge('nope', 'b', 0, 100)).toBeNull();
      expect(book.hedge(job.jobId, 'a', 0, 100)).toBeNull();
      const backup = book.hedge(job.jobId, 'b', 0, 100)!;
      expect(book.hedge(job.jobId, 'c', 0, 100)).toBeNull();
      expect(book.hedge(backup.jobId, 'c', 0, 100)).toBeNull();
      expect(() => book.hedge(job.jobId, 'c', Number.NaN, 100)).toThrow(/now/);
      book.result(job.jobId, 0);
      expect(book.hedge(job.jobId, 'c', 0, 100)).toBeNull();
    });
  });

  it('never loses or duplicates a sample under random disconnects, refusals, deadlines, backups and late results', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const rand = seededRandom(seed);
      const book = createLeaseBook({ maxAttempts: 1000 });
      const peers = ['a', 'b', 'c', 'd'];
      const tasks = Array.from({ length: 30 }, (_, i) => `t${i}`);
      for (const t of tasks) book.add(t, 'm', K);
      const accepted = new Set<string>();
      const everLeased: string[] = [];
      let now = 0;
      for (let step = 0; step < 20_000 && !book.complete; step++) {
        now += 1;
        const r = rand();
        const pending = book.pending();
        if (r < 0.25 && pending.length > 0) {
          const w = pending[Math.floor(rand() * pending.length)]!;
          const lease = book.lease(
            w.taskId,
            w.model,
            peers[Math.floor(rand() * peers.length)]!,
            now,
            now + 50,
          )!;
          expect(lease.samples).toEqual(w.samples);
          everLeased.push(lease.jobId);
        } else if (r < 0.85 && everLeased.length > 0) {
          // A result from any job ever leased: mostly active ones, sometimes late ones.
          const active = book.jobs();
          const jobId =
            active.length > 0 && rand() < 0.9
              ? active[Math.floor(rand() * active.length)]!.jobId
              : everLeased[Math.floor(rand() * everLeased.length)]!;
          const job = book.job(jobId);
          const samples = job ? book.remaining(jobId) : K;
          const sample = samples[Math.floor(rand() * samples.length)];
          if (sample === undefined) continue;
          const taskId = jobId.split('#')[0]!;
          const out = book.result(jobId, sample);
          const id = `${taskId}/${sample}`;
          if (out.status === 'accepted') {
            expect(accepted.has(id)).toBe(false);
            accepted.add(id);
          } else if (out.status === 'duplicate') expect(accepted.has(id)).toBe(true);
        } else if (r < 0.87) book.disconnect(peers[Math.floor(rand() * peers.length)]!);
        else if (r < 0.9) {
          const active = book.jobs();
          const job = active[Math.floor(rand() * active.length)];
          const backup =
            job && book.hedge(job.jobId, peers[Math.floor(rand() * peers.length)]!, now, now + 50);
          if (backup) everLeased.push(backup.jobId);
        } else if (r < 0.95) {
          const active = book.jobs();
          if (active.length > 0) book.release(active[Math.floor(rand() * active.length)]!.jobId, 'refused');
        } else book.expire(now);
        const s = consistent(book);
        expect(s.done).toBe(accepted.size);
        // A sample is leased to at most one active job, and every active job's remaining samples are leased.
        // A backup runs only samples its job still waits on.
        const seen = new Set<string>();
        for (const job of book.jobs()) {
          if (job.backupOf) {
            const of = book.remaining(job.backupOf);
            expect(book.job(job.backupOf)).toBeDefined();
            for (const sample of book.remaining(job.jobId)) expect(of).toContain(sample);
            continue;
          }
          for (const sample of book.remaining(job.jobId)) {
            const id = `${job.taskId}/${sample}`;
            expect(seen.has(id)).toBe(false);
            expect(accepted.has(id)).toBe(false);
            seen.add(id);
          }
        }
        expect(seen.size).toBe(s.leased);
      }
      expect(book.complete).toBe(true);
      expect(accepted.size).toBe(tasks.length * K.length);
    }
  });
});

describe('lease book: generating jobs', () => {
  const generating = (book: LeaseBook, peer: string) => book.outstanding().get(peer)?.generating;

  it('counts a job as generating until each of its samples is generated or done', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0, 1, 2]);
    const job = book.lease('t', 'm', 'a', 0, 10)!;
    expect(book.generated(job.jobId, 0)).toBe(false);
    expect(book.generated(job.jobId, 0)).toBe(false); // the same sample twice
    expect(book.generated(job.jobId, 9)).toBe(false); // not the job's
    expect(generating(book, 'a')).toBe(1);
    // A result needs no `generated` first (a sample reported from the worker's log).
    book.result(job.jobId, 1);
    expect(book.generated(job.jobId, 2)).toBe(true);
    expect(book.outstanding().get('a')).toEqual({ jobs: 1, generating: 0, models: ['m'] });
    expect(book.generated(job.jobId, 2)).toBe(false);
    book.result(job.jobId, 0);
    book.result(job.jobId, 2);
    expect(book.outstanding().size).toBe(0);
  });

  it('a job released while generating leaves the counts, and a generated of it is ignored', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0, 1]);
    const job = book.lease('t', 'm', 'a', 0, 10)!;
    book.generated(job.jobId, 0);
    book.release(job.jobId, 'failed');
    expect(book.outstanding().size).toBe(0);
    expect(book.generated(job.jobId, 1)).toBe(false);
    const again = book.lease('t', 'm', 'a', 1, 10)!;
    expect(generating(book, 'a')).toBe(1);
    expect(book.generated(again.jobId, 0)).toBe(false);
    expect(book.generated(again.jobId, 1)).toBe(true);
    expect(generating(book, 'a')).toBe(0);
  });

  it('a sample its backup finished needs generating by neither', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0, 1]);
    const job = book.lease('t', 'm', 'a', 0, 10)!;
    const backup = book.hedge(job.jobId, 'b', 1, 10)!;
    book.generated(job.jobId, 0);
    expect([generating(book, 'a'), generating(book, 'b')]).toEqual([1, 1]);
    // The backup reports sample 1: the job has generated 0 and 1 is done, so it only scores now.
    book.result(backup.jobId, 1);
    expect([generating(book, 'a'), generating(book, 'b')]).toEqual([0, 1]);
    // And the job's result for 0 finishes both: the backup has nothing left to generate either.
    book.result(job.jobId, 0);
    expect(book.outstanding().size).toBe(0);
  });

  it('when a job ends, its backup takes over its samples and keeps generating what it has not', () => {
    const book = createLeaseBook();
    book.add('t', 'm', [0, 1]);
    const job = book.lease('t', 'm', 'a', 0, 10)!;
    const backup = book.hedge(job.jobId, 'b', 1, 10)!;
    book.generated(backup.jobId, 0);
    book.release(job.jobId, 'failed');
    expect(book.outstanding()).toEqual(new Map([['b', { jobs: 1, generating: 1, models: ['m'] }]]));
    expect(book.generated(backup.jobId, 1)).toBe(true);
    expect(generating(book, 'b')).toBe(0);
  });
});
