import type { WorkerLoad } from '../protocol/job.ts';
import type { FleetNode } from './fleet-view.ts';
import type { Lease, LeaseBook } from './lease-book.ts';
import type { Placement, PlacementReason, PlacementRequest, Placer } from './placer.ts';
import { fleetFreeSlots, freeSlots, indexFleet, type RoomContext, withRoom } from './room.ts';

/** What the submitter knows about a node's room besides the fleet view and its own leases. */
export interface RoomState {
  /** This node's peer id (never on probation). */
  selfPeerId: string;
  /** Nodes that returned a scored sample (out of probation: all their slots count). */
  proven: ReadonlySet<string>;
  /** peerId → until when (ms since epoch) it said it is full (back-pressure). */
  busyUntil: ReadonlyMap<string, number>;
  /** peerId → the load its last job message reported (fresher than its advert when newer). */
  reported?: ReadonlyMap<string, WorkerLoad>;
}

/** One job the tick decided to start. */
export interface TickDecision<T> {
  lease: Lease;
  task: T;
  /** Why its node was chosen (`spill` when the placer's choice had no room). */
  reason: PlacementReason;
}

export interface TickInput<T extends PlacementRequest['task']> {
  /** The submitter's lease book: the tick leases the work it places. */
  book: LeaseBook;
  /** The placer (placement/placer.ts). */
  placer: Placer;
  /** Tasks by id. */
  tasks: ReadonlyMap<string, T>;
  /** The fleet view now, taken once for the tick. */
  nodes: readonly FleetNode[];
  /** Probation and back-pressure state. */
  room: RoomState;
  /** The time of the tick, ms since epoch. */
  now: number;
  /** Deadline of a lease granted now, ms since epoch. */
  deadline: number;
}

export interface TickResult<T> {
  /** Jobs leased in the book this tick, in order: the runner starts them. */
  decisions: TickDecision<T>[];
  /** The last reason some work had no eligible node, or null (only looked for when nothing runs). */
  blocked: string | null;
  /** True when some node was refused for cooling down after failures. */
  coolingDown: boolean;
}

/** The room context of a tick (placement/room.ts). */
export function roomContext(
  nodes: readonly FleetNode[],
  book: LeaseBook,
  room: RoomState,
  now: number,
): RoomContext {
  return { fleet: indexFleet(nodes), outstanding: book.outstanding(), ...room, now };
}

/**
 * Places one job, retrying without its exclusions when every node that could take it is excluded
 * (a loaded fleet, a transient fault: they get it again rather than the campaign stalling;
 * maxAttempts still bounds the placements).
 */
export function placeOne(
  placer: Placer,
  request: PlacementRequest,
  nodes: readonly FleetNode[],
  now: number,
  ctx: RoomContext,
): Placement {
  const p = placer.place(request, nodes, now, ctx.outstanding);
  if (p.ok || !p.rejected.some((r) => r.rejection.code === 'excluded')) return p;
  return placer.place({ task: request.task, model: request.model }, nodes, now, ctx.outstanding);
}

/**
 * One placement round: leases pending work, in the book's order, to the placer's choice or the next
 * node in rendezvous order with room. Costs O(fleet) when no node has room and O(N) per decision
 * otherwise: it stops when the fleet's free slots are used (unless nothing runs, when it looks on
 * for why work is blocked), and work of a kind (model, workspace, exclusions) that found no node
 * skips the placer for the rest of the round (rooms and eligibility only shrink within a round).
 */
export function placeTick<T extends PlacementRequest['task']>(input: TickInput<T>): TickResult<T> {
  const { book, placer, now, nodes } = input;
  const out: TickResult<T> = { decisions: [], blocked: null, coolingDown: false };
  const ctx = roomContext(nodes, book, input.room, now);
  let free = fleetFreeSlots(ctx);
  const idle = book.stats().activeJobs === 0;
  /** Kind of work → why it found no node this round (null: eligible nodes, none with room). */
  const stuck = new Map<string, { blocked: string; coolingDown: boolean } | null>();
  for (const work of book.waiting()) {
    // Nothing more can be placed; without running jobs, the blocked reason still matters (stall).
    if (free === 0 && !(idle && out.decisions.length === 0)) break;
    const task = input.tasks.get(work.taskId);
    if (!task) continue;
    const exclude = book.refusedBy(work.taskId, work.model);
    const kind = JSON.stringify([work.model, task.workspace.id, exclude]);
    const known = stuck.get(kind);
    if (known !== undefined) {
      if (known) {
        out.blocked = known.blocked;
        out.coolingDown ||= known.coolingDown;
      }
      continue;
    }
    const p = placeOne(placer, { task, model: work.model, exclude }, nodes, now, ctx);
    if (!p.ok) {
      const coolingDown = p.rejected.some((r) => r.rejection.code === 'cooling-down');
      stuck.set(kind, { blocked: p.message, coolingDown });
      out.blocked = p.message;
      out.coolingDown ||= coolingDown;
      continue;
    }
    const target = free > 0 ? withRoom(p, ctx) : null;
    if (!target) {
      stuck.set(kind, null);
      continue;
    }
    const before = freeSlots(target, ctx);
    const lease = book.lease(work.taskId, work.model, target, now, input.deadline);
    if (!lease) continue;
    ctx.outstanding = book.outstanding();
    free += freeSlots(target, ctx) - before;
    out.decisions.push({ lease, task, reason: decisionReason(p, target) });
  }
  return out;
}

/** Why a job went to `target`: the placer's reason for its own choice, else spill, or fetching. Pure. */
export function decisionReason(
  p: { peerId: string; reason: PlacementReason; ranked: readonly { peerId: string; fetching: boolean }[] },
  target: string,
): PlacementReason {
  if (target === p.peerId) return p.reason;
  return p.ranked.find((r) => r.peerId === target)?.fetching ? 'fetching' : 'spill';
}

/** The campaign's stall state after a tick. */
export interface StallState {
  /** The reason to show for work with no node, or null to keep the last one shown. */
  problem: string | null;
  /** Since when no node could ever take the waiting work (ms since epoch), or null. */
  noNodeSince: number | null;
}

/**
 * The stall state after a tick: work is blocked when the tick placed nothing, found no eligible node
 * for some work and no job runs (`activeJobs`, counted after the tick). A node cooling down after
 * failures comes back (and a task's placements are bounded by maxAttempts): only a fleet where no
 * node could ever take the work starts (or keeps) the stall clock. Pure.
 */
export function stallAfterTick(
  tick: TickResult<unknown>,
  activeJobs: number,
  noNodeSince: number | null,
  now: number,
): StallState {
  if (!tick.blocked || tick.decisions.length !== 0 || activeJobs !== 0)
    return { problem: null, noNodeSince: null };
  return { problem: tick.blocked, noNodeSince: tick.coolingDown ? null : (noNodeSince ?? now) };
}

/** True when no node could take the work for longer than `timeoutMs` (the campaign stalls). Pure. */
export function stalledFor(noNodeSince: number | null, now: number, timeoutMs: number): boolean {
  return noNodeSince !== null && now - noNodeSince > timeoutMs;
}
