import type { Advert } from '../protocol/advert.ts';
import { resolveWarm } from '../protocol/warm-delta.ts';
import { createFailureDetector, type FailureDetectorOptions, type PeerLiveness } from './failure-detector.ts';

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
  /** Advert interval in ms: the failure detector's nominal heartbeat interval. */
  intervalMs: number;
  /** Intervals a peer may miss without being dropped (default 3); a peer whose connection is down is dropped then. */
  missedIntervals?: number;
  /** Failure detector settings other than the interval (placement/failure-detector.ts). */
  detector?: Omit<FailureDetectorOptions, 'intervalMs' | 'minSilenceMs'>;
}

/** Why an advert was or was not taken. */
export type ApplyResult = 'new' | 'updated' | 'stale' | 'left';

/**
 * The fleet view: the newest advert per peer. Pure state, driven by the node: `apply` each advert
 * received, `expire` on a timer. Older or equal sequence numbers are ignored, a leaving advert
 * removes the peer; a warm list sent as a delta is resolved against the one held. Adverts are the heartbeats of a φ accrual failure detector: a peer is dropped
 * when the detector suspects it (a live node with jittery adverts keeps a longer grace than a
 * regular one), or after `missedIntervals` silent intervals when its connection is down too.
 */
export interface FleetView {
  apply(advert: Advert, now: number): ApplyResult;
  /** Drops a peer at once and forgets its advert history. */
  remove(peerId: string): boolean;
  /**
   * Drops the peers the failure detector suspects at `now`; `connected` says whether this node
   * has a connection to a peer (default: every peer is). Returns the ids dropped.
   */
  expire(now: number, connected?: (peerId: string) => boolean): string[];
  /** The failure detector's statistics of a peer (also of one dropped for silence, until it returns). */
  liveness(peerId: string): PeerLiveness | undefined;
  get(peerId: string): FleetNode | undefined;
  /** Every node, self first, then by host name and peer id. */
  nodes(): FleetNode[];
  readonly size: number;
}

export function createFleetView(options: FleetViewOptions): FleetView {
  const missed = options.missedIntervals ?? 3;
  const byPeer = new Map<string, FleetNode>();
  const detector = createFailureDetector({
    ...options.detector,
    intervalMs: options.intervalMs,
    minSilenceMs: missed * options.intervalMs,
  });

  return {
    apply(advert, now) {
      const existing = byPeer.get(advert.peerId);
      if (existing && advert.seq <= existing.advert.seq) return 'stale';
      if (advert.leaving) {
        byPeer.delete(advert.peerId);
        detector.remove(advert.peerId);
        return 'left';
      }
      // A warm list sent as a delta is applied to the one held (protocol/warm-delta.ts): the view
      // always holds whole lists, so placement never sees a delta.
      byPeer.set(advert.peerId, {
        advert: resolveWarm(advert, existing?.advert),
        receivedAt: now,
        self: advert.peerId === options.selfPeerId,
      });
      detector.heartbeat(advert.peerId, now);
      return existing ? 'updated' : 'new';
    },
    remove(peerId) {
      if (peerId === options.selfPeerId) return false;
      detector.remove(peerId);
      return byPeer.delete(peerId);
    },
    expire(now, connected = () => true) {
      const dropped: string[] = [];
      for (const [peerId, node] of byPeer) {
        if (!node.self && detector.suspected(peerId, now, connected(peerId))) {
          byPeer.delete(peerId);
          dropped.push(peerId);
        }
      }
      return dropped;
    },
    liveness(peerId) {
      return detector.liveness(peerId);
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
