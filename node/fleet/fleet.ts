import { KEEP_ALIVE, type PeerId } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { multiaddr } from '@multiformats/multiaddr';
import { createFleetView, type FleetView } from '../../placement/fleet-view.ts';
import type { Advert } from '../../protocol/advert.ts';
import { canonicalJson } from '../../protocol/canonical.ts';
import { advertTopic } from '../../protocol/topics.ts';
import { createWarmEncoder } from '../../protocol/warm-delta.ts';
import { logger } from '../logger.ts';
import type { OriginCheck } from '../membership/service.ts';
import { countedValidator, metrics } from '../metrics.ts';
import { type AdvertBody, advertValidator, decodeAdvert, encodeAdvert, fitAdvert } from './adverts.ts';
import type { Host } from './host.ts';

export interface FleetOptions {
  /** The started libp2p host. */
  host: Host;
  /** Fleet id (scopes the topics). */
  fleetId: string;
  /** Advert interval, ms: the failure detector's heartbeat interval (placement/failure-detector.ts). */
  intervalMs: number;
  /** High part of the sequence numbers: the node's boot count, so a restarted node's adverts are newer. */
  seqBase: number;
  /** Builds the current advert body (models, memory, load, ...). Called at every publish. */
  describe: () => AdvertBody;
  /** Bootstrap multiaddrs (with /p2p/): dialled at start and retried with back-off until they answer. */
  bootstrap: string[];
  /** Addresses of peers known from earlier runs, dialled at start. */
  knownPeers?: Record<string, string[]>;
  /** Called when the set of nodes or their adverts change. */
  onChange?: (view: FleetView) => void;
  /** Membership: adverts count only from members (their certificate rides in the advert). */
  members?: OriginCheck;
}

export interface Fleet {
  readonly view: FleetView;
  /** Publishes (on the next turn of the event loop) if the node's description changed since the last advert. */
  touch(): void;
  /** Peer ids and addresses of the members seen, for restarts. */
  knownPeers(): Record<string, string[]>;
  /** The last adverts accepted: [receive time, propagation delay = receive time − sender's publish time], ms. */
  advertDelays(): [number, number][];
  /** Publishes a leaving advert and stops the timers. */
  stop(options?: { signal?: AbortSignal }): Promise<void>;
}

/** Dial back-off per peer: 1 s doubling to 10 s. */
const DIAL_MIN_MS = 1000;
const DIAL_MAX_MS = 10_000;
/** Seq numbers: boot count × SEQ_STRIDE + adverts sent in this boot. */
export const SEQ_STRIDE = 1_000_000_000;

/**
 * Fleet membership: publishes this node's advert every interval and on change, keeps the fleet
 * view from the adverts it receives, and keeps a connection to every member it learns of (addresses
 * travel in adverts, so the mesh is not a star around the bootstrap node).
 */
export function createFleet(options: FleetOptions): Fleet {
  const log = logger('vtnode:fleet');
  const { host } = options;
  const self = host.peerId.toString();
  const topic = advertTopic(options.fleetId);
  const view = createFleetView({ selfPeerId: self, intervalMs: options.intervalMs });
  const pubsub = host.services.pubsub;
  const known = new Map<string, string[]>(Object.entries(options.knownPeers ?? {}));
  // Bootstrap peers are dialled like any known member: with back-off, KEEP_ALIVE-tagged, until they
  // answer (@libp2p/bootstrap dials once and never again, so a joiner that starts before its
  // bootstrap node would stay alone).
  for (const addr of options.bootstrap) {
    const peerId = addr.split('/p2p/')[1];
    if (!peerId || peerId === self) continue;
    known.set(peerId, [...new Set([...(known.get(peerId) ?? []), addr.slice(0, addr.lastIndexOf('/p2p/'))])]);
  }
  const left = new Set<string>();
  const dialState = new Map<string, { next: number; backoff: number; inFlight: boolean }>();
  const delays: [number, number][] = [];
  let counter = 0;
  let lastBody = '';
  // A touch() waiting for its turn (touch).
  let touchPending = false;
  let stopped = false;

  const changed = () => options.onChange?.(view);

  const warmEncoder = createWarmEncoder();

  /** This node's advert now: whole (for its own view) and as sent (the warm list as a delta when it pays). */
  function advertNow(
    body: AdvertBody,
    leaving: boolean,
    wholeWarm: boolean,
  ): { whole: Advert; sent: Advert } {
    counter += 1;
    const whole = fitAdvert({
      v: 1,
      peerId: self,
      seq: options.seqBase * SEQ_STRIDE + counter,
      sentAt: Date.now(),
      leaving,
      ...body,
    });
    const warm = warmEncoder.encode(whole.warm, leaving || wholeWarm);
    return { whole: { ...whole, warmRev: warm.warmRev }, sent: { ...whole, ...warm } };
  }

  /** Publishes the advert now (`wholeWarm`: the warm list whole, for a peer that just connected). */
  async function publish(leaving = false, wholeWarm = false, body = options.describe()): Promise<void> {
    const { whole, sent } = advertNow(body, leaving, wholeWarm);
    lastBody = canonicalJson(body);
    if (!leaving) view.apply(whole, Date.now());
    try {
      await pubsub.publish(topic, encodeAdvert(sent));
      metrics().gossip.inc({ topic: 'advert', direction: 'out' });
    } catch (err) {
      log.warn('publishing the advert failed', err);
    }
  }

  function onAdvert(advert: Advert): void {
    const from = advert.peerId;
    const result = view.apply(advert, Date.now());
    if (result === 'stale') return;
    delays.push([Date.now(), Date.now() - advert.sentAt]);
    if (delays.length > 1000) delays.shift();
    if (result === 'left') {
      left.add(from);
      known.delete(from);
      void untag(from);
      log('%s left the fleet', from);
    } else {
      left.delete(from);
      if (advert.addrs.length > 0) known.set(from, advert.addrs);
      if (result === 'new') log('%s joined (%s)', from, advert.host ?? 'host withheld');
      void ensureConnected(from);
    }
    changed();
  }

  async function untag(peerId: string): Promise<void> {
    try {
      await host.peerStore.merge(peerIdFromString(peerId), { tags: { [KEEP_ALIVE]: undefined } });
    } catch {
      // The peer may never have been stored.
    }
  }

  async function ensureConnected(peerId: string): Promise<void> {
    if (stopped || peerId === self || left.has(peerId)) return;
    const id: PeerId = peerIdFromString(peerId);
    if (host.getConnections(id).length > 0) return;
    const now = Date.now();
    const state = dialState.get(peerId) ?? { next: 0, backoff: DIAL_MIN_MS, inFlight: false };
    dialState.set(peerId, state);
    if (state.inFlight || now < state.next) return;
    state.inFlight = true;
    try {
      const addrs = (known.get(peerId) ?? []).flatMap((a) => {
        try {
          return [multiaddr(a)];
        } catch {
          return [];
        }
      });
      await host.peerStore.merge(id, { multiaddrs: addrs, tags: { [KEEP_ALIVE]: { value: 100 } } });
      await host.dial(id, { signal: AbortSignal.timeout(10_000) });
      state.backoff = DIAL_MIN_MS;
      state.next = 0;
    } catch (err) {
      state.next = Date.now() + state.backoff;
      state.backoff = Math.min(state.backoff * 2, DIAL_MAX_MS);
      log('dialling %s failed: %s', peerId, (err as Error).message);
    } finally {
      state.inFlight = false;
    }
  }

  pubsub.topicValidators.set(
    topic,
    countedValidator(
      'advert',
      advertValidator((err) => log.warn(`rejected an advert: ${err.message}`), options.members),
    ),
  );
  const onMessage = (evt: CustomEvent) => {
    const msg = evt.detail as { topic: string; type: string; data: Uint8Array; from?: PeerId };
    if (msg.topic !== topic || msg.type !== 'signed' || !msg.from) return;
    try {
      onAdvert(decodeAdvert(msg.data, msg.from.toString()));
    } catch (err) {
      log.warn(`ignored an advert: ${(err as Error).message}`);
    }
  };
  pubsub.addEventListener('message', onMessage);
  pubsub.subscribe(topic);

  // A lost connection does not drop a node from the view (a busy node's connection may time out while
  // its adverts still arrive through other members): it is dialled again, and dropped only if its
  // adverts stop too (after `missedIntervals`, see placement/fleet-view.ts).
  // A peer the fleet refuses (a revoked member) is dropped at once and not dialled again.
  const onDisconnect = (evt: CustomEvent<PeerId>) => {
    const peerId = evt.detail.toString();
    if (!view.get(peerId)) return;
    void dropIfRefused(peerId).then((dropped) => {
      if (dropped || stopped) return;
      log('%s disconnected: dialling it again', peerId);
      void ensureConnected(peerId);
    });
  };
  async function dropIfRefused(peerId: string): Promise<boolean> {
    const check = await options.members?.origin(peerId).catch(() => null);
    if (check?.verdict !== 'reject') return false;
    known.delete(peerId);
    if (view.remove(peerId)) {
      log.warn(`${peerId} dropped from the fleet view: ${check.reason}`);
      changed();
    }
    return true;
  }
  host.addEventListener('peer:disconnect', onDisconnect);
  const onConnect = () => {
    // A new connection: tell the peer who we are right away rather than at the next tick, with the
    // whole warm list (it holds none of ours to apply a delta to).
    void publish(false, true);
  };
  host.addEventListener('peer:connect', onConnect);
  const onDiscovery = (evt: CustomEvent<{ id: PeerId }>) => void ensureConnected(evt.detail.id.toString());
  host.addEventListener('peer:discovery', onDiscovery);

  for (const peerId of known.keys()) void ensureConnected(peerId);

  const connected = (peerId: string) => host.getConnections(peerIdFromString(peerId)).length > 0;
  let lastTick = Date.now();
  const tick = setInterval(() => {
    const now = Date.now();
    // A tick much later than due means this process was stalled (overloaded, suspended): the adverts
    // that arrived meanwhile are still unread, so nobody is judged on this tick.
    const since = now - lastTick;
    lastTick = now;
    void publish();
    if (since > 2 * options.intervalMs)
      log('this node was stalled (%d ms since the last tick): no peer is expired on this tick', since);
    else {
      const dropped = view.expire(now, connected);
      for (const peerId of dropped) log('%s went silent: dropped from the fleet view', peerId);
      if (dropped.length > 0) changed();
    }
    for (const peerId of known.keys()) void ensureConnected(peerId);
  }, options.intervalMs);
  void publish();

  return {
    view,
    touch() {
      if (stopped || touchPending) return;
      // On a later turn, once: a change is often noticed on a job's critical path (a job slot freed,
      // a warm answer just before its fan-out request), and describing, signing and publishing an
      // advert costs a millisecond or more that the next model request must not wait for. Changes
      // made in one turn share one advert.
      touchPending = true;
      setTimeout(() => {
        touchPending = false;
        if (stopped) return;
        const body = options.describe();
        if (canonicalJson(body) !== lastBody) void publish(false, false, body);
      }, 0);
    },
    knownPeers() {
      return Object.fromEntries(known);
    },
    advertDelays() {
      return [...delays];
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(tick);
      host.removeEventListener('peer:disconnect', onDisconnect);
      host.removeEventListener('peer:connect', onConnect);
      host.removeEventListener('peer:discovery', onDiscovery);
      await publish(true);
      pubsub.removeEventListener('message', onMessage);
    },
  };
}
