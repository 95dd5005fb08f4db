import { describe, expect, it } from 'vitest';
import type { FleetNode } from '../../placement/fleet-view.ts';
import { createHedger, type Hedger } from '../../placement/hedge.ts';
import { hedgeTick, type JobProgress, watchedJobs } from '../../placement/hedge-tick.ts';
import { createLeaseBook, type LeaseBook } from '../../placement/lease-book.ts';
import { createPlacer, type Placer } from '../../placement/placer.ts';
import { createReputation } from '../../placement/reputation.ts';
import { withRoom } from '../../placement/room.ts';
import { seededRandom } from '../../placement/seeded-random.ts';
import { type RoomState, roomContext } from '../../placement/tick.ts';
import { advert, fleetNode, MODEL, task, WS, WS_B } from '../helpers/adverts.ts';

type T = ReturnType<typeof task>;
const K = [0, 1, 2];

/** The runner's hedge round as it was before issue 14 build 7 (decisions inline in hedgeStalled): the reference. */
function referenceHedge(
  book: LeaseBook,
  placer: Placer,
  hedger: Hedger,
  tasks: ReadonlyMap<string, T>,
  nodes: readonly FleetNode[],
  room: RoomState,
  now: number,
  progress: ReadonlyMap<string, JobProgress>,
  nodeProgress: ReadonlyMap<string, number>,
) {
  const jobs = book.jobs();
  const paired = new Set(jobs.flatMap((j) => (j.backupOf ? [j.jobId, j.backupOf] : [])));
  const watched = jobs.map((j) => ({
    jobId: j.jobId,
    peerId: j.peerId,
    model: j.model,
    lastProgressAt: progress.get(j.jobId)?.at ?? j.leasedAt,
    beatAt: progress.get(j.jobId)?.beatAt,
    nodeProgressAt: nodeProgress.get(j.peerId) ?? 0,
    hedged: paired.has(j.jobId),
  }));
  const out: (string | number)[][] = [];
  for (const stalled of hedger.stalled(watched, now)) {
    const job = book.job(stalled.jobId);
    const t = job && tasks.get(job.taskId);
    if (!job || !t) continue;
    const exclude = [job.peerId, ...book.refusedBy(job.taskId, job.model)];
    const ctx = roomContext(nodes, book, room, now);
    const p = placer.place({ task: t, model: job.model, exclude }, nodes, now, ctx.outstanding);
    const target = p.ok ? withRoom(p, ctx) : null;
    if (!target || exclude.includes(target)) continue;
    const backup = book.hedge(job.jobId, target, now, now + 100);
    if (!backup) continue;
    out.push([backup.jobId, backup.peerId, job.jobId, t.id, now - stalled.lastProgressAt]);
  }
  return out;
}

/** A random fleet and running jobs with random silences, built the same way into as many books as asked. */
function scenario(seed: number) {
  const rand = seededRandom(seed);
  const pick = <X>(xs: readonly X[]) => xs[Math.floor(rand() * xs.length)]!;
  const now = 1_000_000;
  const nodes = Array.from({ length: 1 + Math.floor(rand() * 8) }, (_, i) => {
    const capacity = Math.floor(rand() * 4);
    return fleetNode(
      advert(`n${i}`, {
        load: { queued: 0, running: Math.floor(rand() * (capacity + 1)), capacity },
        workspaces: rand() < 0.85 ? [WS] : [WS_B],
      }),
    );
  });
  const peers = [...nodes.map((x) => x.advert.peerId), 'gone'];
  const room: RoomState = {
    selfPeerId: pick(peers),
    proven: new Set(peers.filter(() => rand() < 0.7)),
    busyUntil: new Map(peers.filter(() => rand() < 0.1).map((p) => [p, now + 1000])),
  };
  const reputation = createReputation();
  for (const p of peers) if (rand() < 0.1) for (let i = 0; i < 5; i++) reputation.failure(p, now - 10);
  const hedger = createHedger({ minStallMs: 1000, unmeasuredStallMs: 5000, beatGraceMs: 2000 });
  if (rand() < 0.7) for (let i = 0; i < 20; i++) hedger.gap(MODEL, Math.floor(rand() * 1000));
  const tasks = new Map<string, T>();
  const progress = new Map<string, JobProgress>();
  const nodeProgress = new Map<string, number>();
  for (const p of peers) if (rand() < 0.5) nodeProgress.set(p, now - Math.floor(rand() * 20_000));
  const ops: ((book: LeaseBook) => void)[] = [];
  for (let i = 0; i < Math.floor(rand() * 30); i++) {
    const t = task(`${i}`);
    if (rand() < 0.95) tasks.set(t.id, t);
    const peer = pick(peers);
    const leasedAt = now - Math.floor(rand() * 20_000);
    const refusal = rand() < 0.2 ? pick(peers) : null;
    const hedged = rand() < 0.15 ? pick(peers) : null;
    if (rand() < 0.6)
      progress.set(JSON.stringify([t.id, MODEL]), {
        at: now - Math.floor(rand() * 20_000),
        ...(rand() < 0.3 ? { beatAt: now - Math.floor(rand() * 3000) } : {}),
      });
    ops.push((book) => {
      book.add(t.id, MODEL, K);
      if (refusal) book.release(book.lease(t.id, MODEL, refusal, 0, 1)!.jobId, 'refused');
      const lease = book.lease(t.id, MODEL, peer, leasedAt, now + 10_000);
      if (lease && hedged) book.hedge(lease.jobId, hedged, leasedAt, now + 10_000);
    });
  }
  const placer = createPlacer({ reputation, epsilon: pick([0, 0.1, 1]) });
  const build = () => {
    const book = createLeaseBook({ maxAttempts: 3 });
    for (const op of ops) op(book);
    // Progress is keyed by job id: give each running job the progress drawn for its work.
    const byJob = new Map<string, JobProgress>();
    for (const j of book.jobs()) {
      const p = progress.get(JSON.stringify([j.taskId, j.model]));
      if (p) byJob.set(j.jobId, p);
    }
    return { book, progress: byJob };
  };
  return { nodes, room, tasks, placer, hedger, nodeProgress, build, now };
}

describe('hedge tick', () => {
  it('backs up exactly what the runner’s former hedge round did, on random fleets and silences', () => {
    let backups = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const s = scenario(seed);
      const before = s.build();
      const after = s.build();
      const expected = referenceHedge(
        before.book,
        s.placer,
        s.hedger,
        s.tasks,
        s.nodes,
        s.room,
        s.now,
        before.progress,
        s.nodeProgress,
      );
      const actual = hedgeTick({
        book: after.book,
        placer: s.placer,
        hedger: s.hedger,
        tasks: s.tasks,
        nodes: s.nodes,
        room: s.room,
        now: s.now,
        deadline: s.now + 100,
        progress: after.progress,
        nodeProgress: s.nodeProgress,
      }).map((d) => [d.backup.jobId, d.backup.peerId, d.of.jobId, d.task.id, d.silentMs]);
      expect(actual, `seed ${seed}`).toEqual(expected);
      expect(after.book.jobs(), `seed ${seed}`).toEqual(before.book.jobs());
      backups += expected.length;
    }
    // The scenarios do back jobs up.
    expect(backups).toBeGreaterThan(50);
  });

  it('watches each job from its last progress (else its lease), with its node’s; a pair is hedged', () => {
    const book = createLeaseBook();
    for (const id of ['a', 'b', 'c']) book.add(id, MODEL, K);
    const a = book.lease('a', MODEL, 'n0', 100, 1e9)!;
    const b = book.lease('b', MODEL, 'n1', 200, 1e9)!;
    book.lease('c', MODEL, 'n2', 300, 1e9);
    const backup = book.hedge(b.jobId, 'n3', 400, 1e9)!;
    const watched = watchedJobs(
      book.jobs(),
      new Map([[a.jobId, { at: 150, beatAt: 160 }]]),
      new Map([['n0', 170]]),
    );
    expect(watched.map((w) => [w.jobId, w.lastProgressAt, w.beatAt, w.nodeProgressAt, w.hedged])).toEqual([
      [a.jobId, 150, 160, 170, false],
      [b.jobId, 200, undefined, 0, true],
      [book.jobs()[2]!.jobId, 300, undefined, 0, false],
      [backup.jobId, 400, undefined, 0, true],
    ]);
  });

  it('a silent job is backed up on another node with room, never its own, once', () => {
    const nodes = [fleetNode(advert('n0')), fleetNode(advert('n1'))];
    const room: RoomState = { selfPeerId: 'me', proven: new Set(['n0', 'n1']), busyUntil: new Map() };
    const book = createLeaseBook();
    const t = task('a');
    book.add(t.id, MODEL, K);
    const job = book.lease(t.id, MODEL, 'n0', 0, 1e9)!;
    const input = {
      book,
      placer: createPlacer({ reputation: createReputation() }),
      hedger: createHedger({ minStallMs: 1000, unmeasuredStallMs: 5000 }),
      tasks: new Map([[t.id, t]]),
      nodes,
      room,
      now: 4000,
      deadline: 1e9,
      progress: new Map<string, JobProgress>(),
      nodeProgress: new Map<string, number>(),
    };
    // Not yet silent for the unmeasured stall time.
    expect(hedgeTick(input)).toEqual([]);
    const [d, ...more] = hedgeTick({ ...input, now: 6000 });
    expect(more).toEqual([]);
    expect([d!.backup.peerId, d!.backup.backupOf, d!.of.jobId, d!.silentMs]).toEqual([
      'n1',
      job.jobId,
      job.jobId,
      6000,
    ]);
    // A pair is not backed up again.
    expect(hedgeTick({ ...input, now: 60_000 })).toEqual([]);
  });

  it('no backup when the only other node is full (back-pressure) or refused the work', () => {
    const nodes = [fleetNode(advert('n0')), fleetNode(advert('n1'))];
    const t = task('a');
    const setup = (refused: boolean) => {
      const book = createLeaseBook();
      book.add(t.id, MODEL, K);
      if (refused) book.release(book.lease(t.id, MODEL, 'n1', 0, 1)!.jobId, 'refused');
      book.lease(t.id, MODEL, 'n0', 0, 1e9);
      return book;
    };
    const base = {
      placer: createPlacer({ reputation: createReputation() }),
      hedger: createHedger({ minStallMs: 1000, unmeasuredStallMs: 5000 }),
      tasks: new Map([[t.id, t]]),
      nodes,
      now: 60_000,
      deadline: 1e9,
      progress: new Map<string, JobProgress>(),
      nodeProgress: new Map<string, number>(),
    };
    const proven = new Set(['n0', 'n1']);
    const busy = { selfPeerId: 'me', proven, busyUntil: new Map([['n1', 70_000]]) };
    expect(hedgeTick({ ...base, book: setup(false), room: busy })).toEqual([]);
    const free = { selfPeerId: 'me', proven, busyUntil: new Map<string, number>() };
    expect(hedgeTick({ ...base, book: setup(true), room: free })).toEqual([]);
    expect(hedgeTick({ ...base, book: setup(false), room: free })).toHaveLength(1);
  });
});
