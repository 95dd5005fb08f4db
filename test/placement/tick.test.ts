import { describe, expect, it } from 'vitest';
import type { FleetNode } from '../../placement/fleet-view.ts';
import { createLeaseBook, type LeaseBook } from '../../placement/lease-book.ts';
import { createPlacer, type Placement, type Placer } from '../../placement/placer.ts';
import { createReputation } from '../../placement/reputation.ts';
import { seededRandom } from '../../placement/seeded-random.ts';
import {
  placeTick,
  type RoomState,
  stallAfterTick,
  stalledFor,
  type TickResult,
} from '../../placement/tick.ts';
import { advert, fleetNode, MODEL, model, task, WS, WS_B } from '../helpers/adverts.ts';

type T = ReturnType<typeof task>;
const K = [0, 1, 2];

/** The runner's placement round as it was before issue 14 (every pending job, every node lookup a scan): the reference. */
function referenceTick(
  book: LeaseBook,
  placer: Placer,
  tasks: ReadonlyMap<string, T>,
  nodes: readonly FleetNode[],
  room: RoomState,
  now: number,
): TickResult<T> {
  const hasRoom = (peerId: string) => {
    if ((room.busyUntil.get(peerId) ?? 0) > now) return false;
    const node = nodes.find((n) => n.advert.peerId === peerId);
    if (!node) return false;
    // Generation slots (placement/room.ts): a job past generation frees its slot, up to as many again;
    // a node that reports `waiting` keeps one job waiting for a slot besides.
    const own = book.outstanding().get(peerId);
    const { load } = node.advert;
    const jobs = Math.max(own?.jobs ?? 0, load.queued + load.running);
    if (!room.proven.has(peerId) && peerId !== room.selfPeerId) return jobs < Math.min(1, load.capacity);
    const generating = Math.max(
      own?.generating ?? 0,
      (load.generating ?? load.running) + (load.waiting ?? 0),
    );
    const extra = load.waiting !== undefined && load.capacity > 0 ? 1 : 0;
    return generating < load.capacity + extra && jobs < 2 * load.capacity + extra;
  };
  const withRoom = (p: Extract<Placement, { ok: true }>) =>
    p.ranked
      .map((r) => r.peerId)
      .filter((id, i, all) => all.indexOf(id) === i)
      .sort((a, b) => (a === p.peerId ? -1 : b === p.peerId ? 1 : 0))
      .find((id) => hasRoom(id)) ?? null;
  const out: TickResult<T> = { decisions: [], blocked: null, coolingDown: false };
  for (const work of book.pending()) {
    const t = tasks.get(work.taskId);
    if (!t) continue;
    let p = placer.place(
      { task: t, model: work.model, exclude: book.refusedBy(work.taskId, work.model) },
      nodes,
      now,
      book.outstanding(),
    );
    if (!p.ok && p.rejected.some((r) => r.rejection.code === 'excluded'))
      p = placer.place({ task: t, model: work.model }, nodes, now, book.outstanding());
    if (!p.ok) {
      out.blocked = p.message;
      if (p.rejected.some((r) => r.rejection.code === 'cooling-down')) out.coolingDown = true;
      continue;
    }
    const target = withRoom(p);
    if (!target) continue;
    const lease = book.lease(work.taskId, work.model, target, now, now + 100);
    if (!lease) continue;
    out.decisions.push({ lease, task: t, reason: target === p.peerId ? p.reason : 'spill' });
  }
  return out;
}

/** A random fleet, queue and history, built the same way into as many books as asked. */
function scenario(seed: number) {
  const rand = seededRandom(seed);
  const pick = <X>(xs: readonly X[]) => xs[Math.floor(rand() * xs.length)]!;
  const now = 10_000;
  const n = 1 + Math.floor(rand() * 12);
  const nodes = Array.from({ length: n }, (_, i) => {
    const capacity = Math.floor(rand() * 5);
    const running = Math.floor(rand() * (capacity + 1));
    // Some nodes advertise how many of their running jobs generate (older ones do not), and of
    // those some how many of their queued jobs wait for a slot (older ones do not).
    const queued = Math.floor(rand() * 2);
    const generating = rand() < 0.5 ? { generating: Math.floor(rand() * (running + 1)) } : {};
    const waiting =
      'generating' in generating && rand() < 0.5 ? { waiting: Math.floor(rand() * (queued + 1)) } : {};
    return fleetNode(
      advert(`n${i}`, {
        load: { queued, running, ...generating, ...waiting, capacity },
        models: rand() < 0.8 ? [model()] : [model({ id: 'other' })],
        workspaces: rand() < 0.8 ? [WS] : [WS_B],
        sandbox: { backend: 'bwrap', ok: rand() < 0.95 },
        warm:
          rand() < 0.3
            ? [{ prompt: task(`${Math.floor(rand() * 40)}`).promptFingerprint, model: MODEL }]
            : [],
      }),
    );
  });
  const peers = nodes.map((x) => x.advert.peerId);
  const room: RoomState = {
    selfPeerId: pick(peers),
    proven: new Set(peers.filter(() => rand() < 0.7)),
    busyUntil: new Map(peers.filter(() => rand() < 0.15).map((p) => [p, now + (rand() < 0.5 ? -1 : 1000)])),
  };
  const reputation = createReputation();
  for (const p of peers) if (rand() < 0.1) for (let i = 0; i < 5; i++) reputation.failure(p, now - 10);
  const tasks = new Map<string, T>();
  const ops: ((book: LeaseBook) => void)[] = [];
  const q = Math.floor(rand() * 40);
  // Half the scenarios start with nothing running (where the blocked reason matters).
  const history = rand() < 0.5;
  for (let i = 0; i < q; i++) {
    const t = task(`${i}`, rand() < 0.9 ? WS : WS_B);
    if (rand() < 0.95) tasks.set(t.id, t);
    const m = rand() < 0.85 ? MODEL : 'other';
    ops.push((book) => book.add(t.id, m, K));
    if (!history) continue;
    const r = rand();
    if (r < 0.3) {
      // Leased earlier to some node; sometimes refused or failed there since (an exclusion).
      const peer = pick(peers);
      const cause = pick(['refused', 'failed', 'busy', null] as const);
      ops.push((book) => {
        const lease = book.lease(t.id, m, peer, now - 100, now + 1000)!;
        if (cause) book.release(lease.jobId, cause);
      });
    } else if (r < 0.4) {
      // Running on some node, one sample done.
      const peer = pick(peers);
      ops.push((book) => book.result(book.lease(t.id, m, peer, 0, 1)!.jobId, 0));
    } else if (r < 0.5) {
      // Running on some node, every sample generated: only scoring left.
      const peer = pick(peers);
      ops.push((book) => {
        const lease = book.lease(t.id, m, peer, 0, 1)!;
        for (const i of K) book.generated(lease.jobId, i);
      });
    }
  }
  const placer = createPlacer({ reputation, epsilon: pick([0, 0.1, 1]) });
  const build = () => {
    const book = createLeaseBook({ maxAttempts: 3 });
    for (const op of ops) op(book);
    return book;
  };
  return { nodes, room, tasks, placer, build, now };
}

const summary = (r: TickResult<T>, book: LeaseBook) => ({
  decisions: r.decisions.map((d) => [d.lease.jobId, d.lease.peerId, d.reason, d.task.id]),
  // The blocked reason is only used when nothing was placed and nothing runs (it may stall the campaign).
  ...(r.decisions.length === 0 && book.stats().activeJobs === 0
    ? { blocked: r.blocked, coolingDown: r.coolingDown }
    : {}),
  pending: book.pending(),
  outstanding: [...book.outstanding()].sort(),
});

describe('placement tick', () => {
  it('decides exactly what the runner’s former every-job round decided, on random fleets, queues and histories', () => {
    let placed = 0;
    let stalled = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const s = scenario(seed);
      const before = s.build();
      const after = s.build();
      const expected = summary(referenceTick(before, s.placer, s.tasks, s.nodes, s.room, s.now), before);
      const actual = summary(
        placeTick({
          book: after,
          placer: s.placer,
          tasks: s.tasks,
          nodes: s.nodes,
          room: s.room,
          now: s.now,
          deadline: s.now + 100,
        }),
        after,
      );
      expect(actual, `seed ${seed}`).toEqual(expected);
      placed += expected.decisions.length;
      if (expected.blocked) stalled++;
    }
    // The scenarios exercise both placing and the blocked reasons.
    expect(placed).toBeGreaterThan(400);
    expect(stalled).toBeGreaterThan(10);
  });

  describe('cost', () => {
    function counted(placer: Placer) {
      const calls = { n: 0 };
      return {
        calls,
        placer: {
          ...placer,
          place: (...a: Parameters<Placer['place']>) => {
            calls.n++;
            return placer.place(...a);
          },
        },
      };
    }
    function full(nodes: FleetNode[], queued: number, slotsUsed: number) {
      const book = createLeaseBook();
      const tasks = new Map<string, T>();
      for (let i = 0; i < queued + slotsUsed; i++) {
        const t = task(`${i}`);
        tasks.set(t.id, t);
        book.add(t.id, MODEL, K);
      }
      for (let i = 0; i < slotsUsed; i++)
        book.lease(`task-${i}`, MODEL, nodes[i % nodes.length]!.advert.peerId, 0, 1e9);
      return { book, tasks };
    }
    const room: RoomState = {
      selfPeerId: 'me',
      proven: new Set(['n0', 'n1', 'n2', 'n3', 'x']),
      busyUntil: new Map(),
    };

    it('asks the placer nothing when no node has a free slot, however long the queue', () => {
      const nodes = Array.from({ length: 4 }, (_, i) => fleetNode(advert(`n${i}`)));
      const { book, tasks } = full(nodes, 500, 8);
      const { calls, placer } = counted(createPlacer());
      const r = placeTick({ book, placer, tasks, nodes, room, now: 1, deadline: 2 });
      expect(r.decisions).toEqual([]);
      expect(calls.n).toBe(0);
    });

    it('asks the placer once per free slot, then stops', () => {
      const nodes = Array.from({ length: 4 }, (_, i) => fleetNode(advert(`n${i}`)));
      const { book, tasks } = full(nodes, 500, 6);
      const { calls, placer } = counted(createPlacer());
      const r = placeTick({ book, placer, tasks, nodes, room, now: 1, deadline: 2 });
      expect(r.decisions.map((d) => d.lease.taskId)).toEqual(['task-6', 'task-7']);
      expect(calls.n).toBe(2);
    });

    it('asks the placer once per kind of work when the free slots are on nodes that cannot take it', () => {
      const nodes = [
        ...Array.from({ length: 4 }, (_, i) => fleetNode(advert(`n${i}`))),
        fleetNode(advert('x', { models: [model({ id: 'other' })] })),
        fleetNode(advert('y', { workspaces: [WS_B] })),
      ];
      const { book, tasks } = full(nodes.slice(0, 4), 500, 8);
      const { calls, placer } = counted(createPlacer());
      const r = placeTick({ book, placer, tasks, nodes, room, now: 1, deadline: 2 });
      expect(r.decisions).toEqual([]);
      expect(calls.n).toBe(1);
    });

    it('still finds why work is blocked when nothing runs and no node has room, once per kind of work', () => {
      const nodes = [fleetNode(advert('n0', { load: { queued: 0, running: 2, capacity: 2 } }))];
      const book = createLeaseBook();
      const tasks = new Map<string, T>();
      for (let i = 0; i < 300; i++) {
        const t = task(`${i}`, i % 2 ? WS : WS_B);
        tasks.set(t.id, t);
        book.add(t.id, MODEL, K);
      }
      const { calls, placer } = counted(createPlacer());
      const r = placeTick({ book, placer, tasks, nodes, room, now: 1, deadline: 2 });
      expect(r.decisions).toEqual([]);
      expect(r.blocked).toMatch(/no node holds workspace/);
      expect(calls.n).toBe(2);
    });
  });
});

describe('stall after a tick', () => {
  const tick = (blocked: string | null, decisions: number, coolingDown: boolean): TickResult<T> => ({
    blocked,
    coolingDown,
    decisions: Array.from({ length: decisions }, () => ({}) as TickResult<T>['decisions'][number]),
  });

  it('the same stall clock and problem as the runner’s former round, for every combination', () => {
    for (const blocked of [null, 'no node serves it'])
      for (const decisions of [0, 1])
        for (const active of [0, 2])
          for (const coolingDown of [false, true])
            for (const since of [null, 500]) {
              // The reference: the runner's code before issue 14 build 7.
              let problem: string | null = null;
              let noNodeSince: number | null = since;
              if (blocked && decisions === 0 && active === 0) {
                problem = blocked;
                noNodeSince = coolingDown ? null : (noNodeSince ?? 1000);
              } else noNodeSince = null;
              const label = JSON.stringify({ blocked, decisions, active, coolingDown, since });
              expect(
                stallAfterTick(tick(blocked, decisions, coolingDown), active, since, 1000),
                label,
              ).toEqual({
                problem,
                noNodeSince,
              });
            }
  });

  it('stalls only after the timeout has passed since no node could take the work', () => {
    expect(stalledFor(null, 1e9, 0)).toBe(false);
    expect(stalledFor(1000, 61_000, 60_000)).toBe(false);
    expect(stalledFor(1000, 61_001, 60_000)).toBe(true);
  });
});
