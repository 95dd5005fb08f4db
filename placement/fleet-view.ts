import type { Advert } from '../protocol/advert.ts';

/** One node as the fleet view knows it. */
export interface FleetNode {
  /** The newest advert received from the node. */
  advert: Advert;
  /** Receiver's clock when that advert arrived, ms since epoch. */
  receivedAt: number;
  /** True for the node that owns this view. */
  self: boolean;
}

export interface FleetViewOptions {
  /** Peer id of the node that owns the view (its own advert is kept but never expires). */
  selfPeerId: string;
  /** Advert interval in ms; a peer silent for `missedIntervals` of them is dropped. */
  intervalMs: number;
  /** Intervals a peer may miss before it is dropped (default 3). */
  missedIntervals?: number;
}

/** Why an advert was or was not taken. */
export type ApplyResult = 'new' | 'updated' | 'stale' | 'left';

/**
 * The fleet view: the newest advert per peer. Pure state, driven by the node: `apply` each advert
 * received, `remove` on disconnect, `expire` on a timer. Older or equal sequence numbers are ignored,
 * a leaving advert removes the peer.
 */
export interface FleetView {
  apply(advert: Advert, now: number): ApplyResult;
  remove(peerId: string): boolean;
  /** Drops peers silent for longer than missedIntervals × intervalMs; returns their ids. */
  expire(now: number): string[];
  get(peerId: string): FleetNode | undefined;
  /** Every node, self first, then by host name and peer id. */
  nodes(): FleetNode[];
  readonly size: number;
}

export function createFleetView(options: FleetViewOptions): FleetView {
  const missed = options.missedIntervals ?? 3;
  const byPeer = new Map<string, FleetNode>();

  return {
    apply(advert, now) {
      const existing = byPeer.get(advert.peerId);
      if (existing && advert.seq <= existing.advert.seq) return 'stale';
      if (advert.leaving) {
        byPeer.delete(advert.peerId);
        return 'left';
      }
      byPeer.set(advert.peerId, { advert, receivedAt: now, self: advert.peerId === options.selfPeerId });
      return existing ? 'updated' : 'new';
    },
    remove(peerId) {
      if (peerId === options.selfPeerId) return false;
      return byPeer.delete(peerId);
    },
    expire(now) {
      const limit = missed * options.intervalMs;
      const dropped: string[] = [];
      for (const [peerId, node] of byPeer) {
        if (!node.self && now - node.receivedAt > limit) {
          byPeer.delete(peerId);
          dropped.push(peerId);
        }
      }
      return dropped;
    },
    get(peerId) {
      return byPeer.get(peerId);
    },
    nodes() {
      return [...byPeer.values()].sort((a, b) => {
        if (a.self !== b.self) return a.self ? -1 : 1;
        const ha = a.advert.host ?? '';
        const hb = b.advert.host ?? '';
        if (ha !== hb) return ha < hb ? -1 : 1;
        return a.advert.peerId < b.advert.peerId ? -1 : a.advert.peerId > b.advert.peerId ? 1 : 0;
      });
    },
    get size() {
      return byPeer.size;
    },
  };
}
