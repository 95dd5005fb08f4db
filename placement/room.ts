import type { WorkerLoad } from '../protocol/job.ts';
import type { OutstandingByNode } from './eligibility.ts';
import type { FleetNode } from './fleet-view.ts';

/** How long a node that refused a job as full gets no new job from this submitter, ms. */
export const FULL_BACKOFF_MS = 2000;

/**
 * Jobs past generation (only scoring left) a node holds per job slot, besides its generating jobs:
 * enough for each slot to start its next job while the last one scores, and a bound on the sandbox
 * backlog when scoring is slower than generation. The worker's admission applies the same bound.
 */
export const TAIL_JOBS_PER_SLOT = 1;

/**
 * Jobs a node holds waiting for a generation slot, besides its slots: the next job is already on the
 * node when a slot frees, so the slot starts it at once instead of a round trip to the submitter
 * later (its last `generated`, the placement, the next job's stream and acceptance: tens of ms per
 * job on a LAN). One per node, not per slot, so little work is committed to a node early: a slow
 * node's waiting job is one job. Nodes that do not report `waiting` (older versions) hold none.
 */
export const WAITING_JOBS_PER_NODE = 1;

/** What one node may hold, from its slots (`capacity`) and whether it keeps a waiting job. */
export function jobBounds(capacity: number, queues: boolean): { generation: number; total: number } {
  const waiting = queues && capacity > 0 ? WAITING_JOBS_PER_NODE : 0;
  return { generation: capacity + waiting, total: capacity * (1 + TAIL_JOBS_PER_SLOT) + waiting };
}

/** Back-pressure from nodes: who said it was full, until when. */
export interface BackPressure {
  /** `peerId` refused a job because all its slots were taken (e.g. by another submitter) at `now`. */
  full(peerId: string, now: number): void;
  /** peerId → until when (ms since epoch) it gets no new job. */
  readonly busyUntil: ReadonlyMap<string, number>;
}

export function createBackPressure(backoffMs = FULL_BACKOFF_MS): BackPressure {
  const busyUntil = new Map<string, number>();
  return {
    full(peerId, now) {
      busyUntil.set(peerId, now + backoffMs);
    },
    busyUntil,
  };
}

/** Everything a node's room depends on, taken once per placement round. */
export interface RoomContext {
  /** The fleet view, by peer id. */
  fleet: ReadonlyMap<string, FleetNode>;
  /** This submitter's active jobs per node (the lease book's `outstanding()`). */
  outstanding: OutstandingByNode;
  /** This node's peer id (never on probation). */
  selfPeerId: string;
  /** Nodes that returned a scored sample (out of probation: all their slots count). */
  proven: ReadonlySet<string>;
  /** peerId → until when it said it is full (BackPressure.busyUntil). */
  busyUntil: ReadonlyMap<string, number>;
  /** peerId → the load its last job message reported (used when newer than its advert). */
  reported?: ReadonlyMap<string, WorkerLoad> | undefined;
  /** The time of the round, ms since epoch. */
  now: number;
}

/** The fleet indexed by peer id (the view lists each peer once). */
export function indexFleet(nodes: readonly FleetNode[]): Map<string, FleetNode> {
  return new Map(nodes.map((n) => [n.advert.peerId, n]));
}

/**
 * Jobs `peerId` may take from this submitter now: 0 while it said it is full or is not in the fleet.
 * A node's slots are generation slots: a job whose samples are all generated only waits for the
 * sandbox, so the node takes the next job meanwhile (its model server does not idle through the
 * scoring tail), and up to `slots` such jobs besides (`TAIL_JOBS_PER_SLOT`); one more job may wait
 * on it for a generation slot (`WAITING_JOBS_PER_NODE`). Each count is the larger of this
 * submitter's jobs there and what the node advertises (other submitters' jobs).
 * A node on probation (it never returned a scored sample) has one job at most, so one that
 * advertises many slots and sits on its jobs holds up one job, not a share of the campaign.
 */
export function freeSlots(peerId: string, ctx: RoomContext): number {
  if ((ctx.busyUntil.get(peerId) ?? 0) > ctx.now) return 0;
  const node = ctx.fleet.get(peerId);
  if (!node) return 0;
  const own = ctx.outstanding.get(peerId);
  const load = loadOf(node, ctx.reported?.get(peerId));
  const jobs = Math.max(own?.jobs ?? 0, load.queued + load.running);
  if (!ctx.proven.has(peerId) && peerId !== ctx.selfPeerId)
    return Math.max(0, Math.min(1, load.capacity) - jobs);
  // A node that does not advertise `generating` (an older version) counts every running job as
  // generating. This submitter's own `generating` jobs are those not yet generated: waiting ones too.
  const unstarted = Math.max(own?.generating ?? 0, (load.generating ?? load.running) + (load.waiting ?? 0));
  const bounds = jobBounds(load.capacity, load.waiting !== undefined);
  return Math.max(0, Math.min(bounds.generation - unstarted, bounds.total - jobs));
}

/**
 * A node's load: its advert's, or the one its last job message reported when that is as new or
 * newer (both stamped by the node's clock). A job's last `generated` or its `end` says a slot is free
 * tens of ms before the advert that says so reaches this submitter.
 */
export function loadOf(node: FleetNode, reported: WorkerLoad | undefined): FleetNode['advert']['load'] {
  return reported && reported.at >= node.advert.sentAt ? reported : node.advert.load;
}

/** Free slots over the whole fleet. */
export function fleetFreeSlots(ctx: RoomContext): number {
  let total = 0;
  for (const peerId of ctx.fleet.keys()) total += freeSlots(peerId, ctx);
  return total;
}

/**
 * Never more jobs on a node than its slots: the placer's choice if it has room, else the first node in
 * rendezvous order (`ranked`) that has; null when none has (the job waits for a slot). O(ranked).
 */
export function withRoom(
  choice: { peerId: string; ranked: readonly { peerId: string }[] },
  ctx: RoomContext,
): string | null {
  if (freeSlots(choice.peerId, ctx) > 0) return choice.peerId;
  for (const { peerId } of choice.ranked) if (freeSlots(peerId, ctx) > 0) return peerId;
  return null;
}
