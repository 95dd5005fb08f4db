import type { FleetNode } from './fleet-view.ts';
import type { Lease, LeaseBook } from './lease-book.ts';
import type { Placement, PlacementReason, PlacementRequest, Placer } from './placer.ts';

/** What the submitter knows about a node's room besides the fleet view and its own leases. */
export interface RoomState {
  /** This node's peer id (never on probation). */
  selfPeerId: string;
  /** Nodes that returned a scored sample (out of probation: all their slots count). */
  proven: ReadonlySet<string>;
  /** peerId → until when (ms since epoch) it said it is full (back-pressure). */
  busyUntil: ReadonlyMap<string, number>;
}

/** One job the tick decided to start. */
export interface TickDecision<T> {
  lease: Lease;
  task: T;
  /** Why its node was chosen (`spill` when the placer's choice had no room). */
  reason: PlacementReason;
}

export interface TickInput<T extends PlacementRequest['task']> {
  book: LeaseBook;
  placer: Placer;
  /** Tasks by id. */
  tasks: ReadonlyMap<string, T>;
  /** The fleet now. */
  nodes: () => readonly FleetNode[];
  room: RoomState;
  now: number;
  /** Deadline of a lease granted now, ms since epoch. */
  deadline: number;
}

export interface TickResult<T> {
  /** Jobs leased in the book this tick, in order: the runner starts them. */
  decisions: TickDecision<T>[];
  /** The last reason some work had no eligible node, or null. */
  blocked: string | null;
  /** True when some node was refused for cooling down after failures. */
  coolingDown: boolean;
}

/** True when `peerId` may take one more job from this submitter now. */
export function hasRoom<T extends PlacementRequest['task']>(input: TickInput<T>, peerId: string): boolean {
  const { room, book, now } = input;
  if ((room.busyUntil.get(peerId) ?? 0) > now) return false;
  const node = input.nodes().find((n) => n.advert.peerId === peerId);
  if (!node) return false;
  const own = book.outstanding().get(peerId)?.jobs ?? 0;
  // Probation: a node holds one job until it returns a scored sample, so one that advertises many
  // slots and sits on its jobs (or cannot do them) holds up one job, not a share of the campaign.
  const proven = room.proven.has(peerId) || peerId === room.selfPeerId;
  const slots = proven ? node.advert.load.capacity : Math.min(1, node.advert.load.capacity);
  return Math.max(own, node.advert.load.running) < slots;
}

/**
 * Never more jobs on a node than its slots: the placer's choice if it has room, else the next in
 * rendezvous order that has; otherwise null (the job waits for a slot).
 */
export function withRoom<T extends PlacementRequest['task']>(
  input: TickInput<T>,
  p: Extract<Placement, { ok: true }>,
): string | null {
  return (
    p.ranked
      .map((r) => r.peerId)
      .filter((id, i, all) => all.indexOf(id) === i)
      .sort((a, b) => (a === p.peerId ? -1 : b === p.peerId ? 1 : 0))
      .find((id) => hasRoom(input, id)) ?? null
  );
}

/** One placement round: leases pending work to nodes with room, in the book's order. */
export function placeTick<T extends PlacementRequest['task']>(input: TickInput<T>): TickResult<T> {
  const { book, placer, now } = input;
  const out: TickResult<T> = { decisions: [], blocked: null, coolingDown: false };
  for (const work of book.pending()) {
    const task = input.tasks.get(work.taskId);
    if (!task) continue;
    const nodes = input.nodes();
    let p = placer.place(
      { task, model: work.model, exclude: book.refusedBy(work.taskId, work.model) },
      nodes,
      now,
      book.outstanding(),
    );
    // Every node that could take the work has failed it once (a loaded fleet, a transient fault):
    // they get it again rather than the campaign stalling; maxAttempts still bounds the placements.
    if (!p.ok && p.rejected.some((r) => r.rejection.code === 'excluded'))
      p = placer.place({ task, model: work.model }, nodes, now, book.outstanding());
    if (!p.ok) {
      out.blocked = p.message;
      if (p.rejected.some((r) => r.rejection.code === 'cooling-down')) out.coolingDown = true;
      continue;
    }
    const target = withRoom(input, p);
    if (!target) continue;
    const lease = book.lease(work.taskId, work.model, target, now, input.deadline);
    if (!lease) continue;
    out.decisions.push({ lease, task, reason: target === p.peerId ? p.reason : 'spill' });
  }
  return out;
}
