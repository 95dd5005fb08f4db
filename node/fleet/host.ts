import { gossipsub } from '@chainsafe/libp2p-gossipsub';
import { createTopicScoreParams } from '@chainsafe/libp2p-gossipsub/score';
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { identify } from '@libp2p/identify';
import type { ConnectionProtector, PeerDiscovery, PeerId, PrivateKey } from '@libp2p/interface';
import { mdns } from '@libp2p/mdns';
import { preSharedKey } from '@libp2p/pnet';
import { tcp } from '@libp2p/tcp';
import { createLibp2p, type Libp2p } from 'libp2p';
import { pnetKey } from '../data-dir.ts';
import { libp2pLogger } from '../logger.ts';
import { createInboundGater, type InboundGater } from './gater.ts';
import type { InboundGuard } from './inbound-guard.ts';

/** Largest gossip message a node accepts from a peer, bytes (every topic caps its own messages lower at publish). */
export const MAX_GOSSIP_BYTES = 1024 * 1024;

export interface HostOptions {
  /** The node's identity. */
  privateKey: PrivateKey;
  /**
   * Fleet pre-shared key, hex: peers without it cannot complete a handshake. A function is asked at
   * every new connection, so the key can change under a running host (existing connections stay).
   */
  psk: string | (() => string);
  /** Multiaddrs to listen on. */
  listen: string[];
  /** Discover LAN peers with mDNS. */
  mdns: boolean;
  /** Gossipsub topics whose quietness must not be penalised, with the weight of an invalid message. */
  topics: string[];
  /** Peers refused any connection, either way (revoked members); `direction` says who is connecting. */
  denyPeer?: (peerId: string, direction: 'inbound' | 'outbound') => boolean;
  /**
   * Application gossip score of a peer (added to gossipsub's). Below -50 a peer is sent nothing
   * (no publishes, no gossip, no mesh), but its subscriptions and messages are still read.
   */
  peerScore?: (peerId: string) => number;
}

export type Host = Libp2p<{ pubsub: ReturnType<ReturnType<typeof gossipsub>>; identify: unknown }>;

/** A pnet connection protector that reads the key at every connection (one protector per key value). */
function switchablePsk(psk: string | (() => string)) {
  return (components: Parameters<ReturnType<typeof preSharedKey>>[0]): ConnectionProtector => {
    const protectors = new Map<string, ConnectionProtector>();
    return {
      protect(connection, options) {
        const key = typeof psk === 'function' ? psk() : psk;
        let protector = protectors.get(key);
        if (!protector) {
          protector = preSharedKey({ psk: pnetKey(key), timeout: CONNECTION_LIMITS.pnetTimeoutMs })(
            components,
          );
          protectors.clear();
          protectors.set(key, protector);
        }
        return protector.protect(connection, options);
      },
    };
  };
}

/**
 * Connection limits, chosen for a private fleet under load and under a flood from strangers (see
 * docs/reliability.md, "Liveness and load"). Each value is one libp2p 2.10 option.
 */
export const CONNECTION_LIMITS = {
  /** Time a peer has for its first pnet bytes (its nonce), ms; libp2p's 1 s default fails members on a starved machine. */
  pnetTimeoutMs: 5000,
  /** Time an inbound connection has for the whole upgrade (pnet, noise, yamux), ms. */
  inboundUpgradeTimeoutMs: 10_000,
  /** Inbound handshakes in progress over all addresses. */
  maxIncomingPendingConnections: 128,
  /** Inbound handshakes in progress from one address (a flood from one address leaves the rest free). */
  maxPendingPerAddress: 16,
  /** New inbound connections per address per second (many members behind one NAT, or loopback in tests). */
  inboundConnectionThreshold: 200,
  /** Interval of libp2p's connection pings, ms. */
  pingIntervalMs: 10_000,
  /** Time a ping may take before the connection is closed, ms (libp2p's 5 s closes connections to a node that is merely busy). */
  pingTimeoutMs: 20_000,
} as const;

/**
 * The libp2p host of a vtnode: TCP, the fleet's private network (pnet), noise, yamux, identify and
 * gossipsub with strict signing. Everything libp2p-specific lives under node/fleet/, so a later
 * libp2p upgrade is one contained change.
 */
export async function createHost(options: HostOptions): Promise<Host> {
  // biome-ignore lint/suspicious/noExplicitAny: each discovery module types its own components
  const peerDiscovery: ((components: any) => PeerDiscovery)[] = [];
  if (options.mdns) peerDiscovery.push(mdns({ interval: 5000 }));

  const topics = Object.fromEntries(
    options.topics.map((t) => [
      t,
      createTopicScoreParams({
        topicWeight: 1,
        // Quiet topics are normal here (adverts every few seconds, digests only during campaigns):
        // no penalty for missing mesh deliveries.
        meshMessageDeliveriesWeight: 0,
        meshFailurePenaltyWeight: 0,
        timeInMeshWeight: 0.01,
        timeInMeshQuantum: 1000,
        timeInMeshCap: 3600,
        firstMessageDeliveriesWeight: 1,
        firstMessageDeliveriesDecay: 0.5,
        firstMessageDeliveriesCap: 100,
        // A rejected message (malformed, oversized, forged origin) costs its sender: 1 → no gossip, 2 → graylisted.
        invalidMessageDeliveriesWeight: -20,
        invalidMessageDeliveriesDecay: 0.9,
      }),
    ]),
  );

  const limits = CONNECTION_LIMITS;
  const inbound: InboundGater = createInboundGater({ maxPendingPerAddress: limits.maxPendingPerAddress });
  const host = (await createLibp2p({
    privateKey: options.privateKey,
    // libp2p's logs through the program's logger (VTNODE_DEBUG=libp2p:... names its components).
    logger: libp2pLogger(),
    addresses: { listen: options.listen },
    transports: [tcp()],
    connectionProtector: switchablePsk(options.psk),
    // The stranger-flood guard (by address, before any handshake) and the membership and ban
    // checks (by peer id, once the fleet key is proved) in one gater.
    connectionGater: {
      ...inbound.gater,
      denyDialPeer: (peer: PeerId) => options.denyPeer?.(peer.toString(), 'outbound') ?? false,
      denyInboundEncryptedConnection: async (peer: PeerId, maConn) =>
        (await inbound.gater.denyInboundEncryptedConnection!(peer, maConn)) ||
        (options.denyPeer?.(peer.toString(), 'inbound') ?? false),
      denyOutboundEncryptedConnection: (peer: PeerId) =>
        options.denyPeer?.(peer.toString(), 'outbound') ?? false,
    },
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    peerDiscovery,
    connectionManager: {
      maxConnections: 500,
      inboundConnectionThreshold: limits.inboundConnectionThreshold,
      maxIncomingPendingConnections: limits.maxIncomingPendingConnections,
      inboundUpgradeTimeout: limits.inboundUpgradeTimeoutMs,
    },
    connectionMonitor: {
      pingInterval: limits.pingIntervalMs,
      pingTimeout: { minTimeout: limits.pingTimeoutMs, maxTimeout: limits.pingTimeoutMs },
    },
    services: {
      identify: identify(),
      pubsub: gossipsub({
        globalSignaturePolicy: 'StrictSign',
        allowPublishToZeroTopicPeers: true,
        emitSelf: false,
        fallbackToFloodsub: false,
        maxInboundDataLength: MAX_GOSSIP_BYTES,
        scoreParams: {
          topics,
          // Fleet members often share an address (one lab NAT, or loopback in tests).
          IPColocationFactorWeight: 0,
          behaviourPenaltyWeight: -1,
          appSpecificScore: (peer: string) => options.peerScore?.(peer) ?? 0,
          appSpecificWeight: 1,
        },
        scoreThresholds: { gossipThreshold: -10, publishThreshold: -50, graylistThreshold: -80 },
      }),
    },
  })) as unknown as Host;
  host.addEventListener('stop', () => inbound.stop(), { once: true });
  guards.set(host, inbound.guard);
  return host;
}

const guards = new WeakMap<Host, InboundGuard>();

/** The inbound admission state of a host made by createHost (pending handshakes, bans). */
export function inboundGuardOf(host: Host): InboundGuard | undefined {
  return guards.get(host);
}
