import type { PrivateKey } from '@libp2p/interface';
import { revocationTopic } from '../../protocol/topics.ts';
import type { DataDir } from '../data-dir.ts';
import { createHost, type Host } from '../fleet/host.ts';
import { logger } from '../logger.ts';
import {
  DEFAULT_GRACE_MS,
  type MembershipService,
  NON_MEMBER_SCORE,
  startMembershipService,
} from './service.ts';
import { loadMembershipState, type MembershipState } from './state.ts';

export interface MemberHostOptions {
  /** The node's data dir: fleet, certificate, revocations. */
  dataDir: DataDir;
  /** The node's identity. */
  privateKey: PrivateKey;
  /** Multiaddrs to listen on. */
  listen: string[];
  /** Discover LAN peers with mDNS. */
  mdns: boolean;
  /** Gossip topics besides the revocation topic (which is added). */
  topics: string[];
  /** Time a connected peer has to show a valid certificate before it is disconnected, ms. */
  graceMs?: number;
  /** Called when this node cannot become a member (its invitation refused). */
  onFatal?: (err: Error) => void;
  /** Called when this node's certificate changes. */
  onCertificate?: () => void;
  /** Peers refused any connection besides revoked members (offenders banned for a while). */
  denyPeer?: (peerId: string) => boolean;
}

/**
 * A started libp2p host whose every connection, stream and gossip message is subject to fleet
 * membership: the pre-shared key comes from the membership state (it can rotate), revoked peers are
 * refused any connection, peers without a valid certificate get nothing by gossip and are
 * disconnected after the grace period.
 */
export async function startMemberHost(
  options: MemberHostOptions,
): Promise<{ host: Host; state: MembershipState; membership: MembershipService }> {
  const peerId = (await options.dataDir.identity()).peerId;
  const state = await loadMembershipState({ dataDir: options.dataDir, peerId });
  const log = logger('vtnode:members');
  // Last refusal logged per revoked peer (it retries with back-off; this node's own dials are not logged).
  const refusedAt = new Map<string, number>();
  const host = await createHost({
    privateKey: options.privateKey,
    psk: () => state.psk(),
    listen: options.listen,
    mdns: options.mdns,
    topics: [...options.topics, revocationTopic(state.fleetId)],
    denyPeer: (peer, direction) => {
      if (options.denyPeer?.(peer)) return true;
      if (!state.revokedIndex().peers.has(peer)) return false;
      const now = Date.now();
      if (direction === 'inbound' && (refusedAt.get(peer) ?? 0) < now - 5000) {
        log.warn(`refused a connection from revoked member ${peer}`);
        refusedAt.set(peer, now);
      }
      return true;
    },
    peerScore: (peer) => (state.standing(peer) === 'member' ? 0 : NON_MEMBER_SCORE),
  });
  await host.start();
  const membership = await startMembershipService({
    host,
    state,
    graceMs: options.graceMs ?? DEFAULT_GRACE_MS,
    ...(options.onFatal ? { onFatal: options.onFatal } : {}),
    ...(options.onCertificate ? { onCertificate: options.onCertificate } : {}),
  });
  return { host, state, membership };
}
