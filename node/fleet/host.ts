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
          protector = preSharedKey({ psk: pnetKey(key) })(components);
          protectors.clear();
          protectors.set(key, protector);
        }
        return protector.protect(connection, options);
      },
    };
  };
}

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

  return (await createLibp2p({
    privateKey: options.privateKey,
    addresses: { listen: options.listen },
    transports: [tcp()],
    connectionProtector: switchablePsk(options.psk),
    connectionGater: {
      denyDialPeer: (peer: PeerId) => options.denyPeer?.(peer.toString(), 'outbound') ?? false,
      denyInboundEncryptedConnection: (peer: PeerId) =>
        options.denyPeer?.(peer.toString(), 'inbound') ?? false,
      denyOutboundEncryptedConnection: (peer: PeerId) =>
        options.denyPeer?.(peer.toString(), 'outbound') ?? false,
    },
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    peerDiscovery,
    connectionManager: {
      maxConnections: 500,
      // Many fleet members behind one address (a lab, loopback tests) connect at once.
      inboundConnectionThreshold: 200,
      maxIncomingPendingConnections: 100,
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
}
