import type { OutstandingByNode } from './eligibility.ts';
import type { FleetNode } from './fleet-view.ts';

/** How long a node that refused a job as full gets no new job from this submitter, ms. */
export const FULL_BACKOFF_MS = 2000;

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
  /** The time of the round, ms since epoch. */
  now: number;
}

/** The fleet indexed by peer id (the view lists each peer once). */
export function indexFleet(nodes: readonly FleetNode[]): Map<string, FleetNode> {
  return new Map(nodes.map((n) => [n.advert.peerId, n]));
}

/**
 * Jobs `peerId` may take from this submitter now: 0 while it said it is full or is not in the fleet,
 * else its slots − max(this submitter's jobs there, the jobs it advertises running). A node on
 * probation (it never returned a scored sample) has one slot at most, so one that advertises many and
 * sits on its jobs holds up one job, not a share of the campaign.
 */
export function freeSlots(peerId: string, ctx: RoomContext): number {
  if ((ctx.busyUntil.get(peerId) ?? 0) > ctx.now) return 0;
  const node = ctx.fleet.get(peerId);
  if (!node) return 0;
  const own = ctx.outstanding.get(peerId)?.jobs ?? 0;
  const proven = ctx.proven.has(peerId) || peerId === ctx.selfPeerId;
  const capacity = node.advert.load.capacity;
  const slots = proven ? capacity : Math.min(1, capacity);
  return Math.max(0, slots - Math.max(own, node.advert.load.running));
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
