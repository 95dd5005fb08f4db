import { DEFAULT_ROLES, type InvitableRole, verifyKeyChain } from '../protocol/membership.ts';
import { encodeToken } from '../protocol/token.ts';
import { connectControl, NoDaemonError } from './control/client.ts';
import type { DataDir, FleetFile, NodeConfig } from './data-dir.ts';
import { invite, loadAuthority } from './membership/authority.ts';
import { DEFAULT_PORT, dialableAddrs } from './net.ts';
import type { FleetStatus } from './status.ts';

/** Default lifetime of a join token. */
export const DEFAULT_TOKEN_TTL_MS = 7 * 24 * 3_600_000;
const MAX_BOOTSTRAP = 16;

/**
 * Bootstrap addresses for a token issued by this node: its --announce addresses if set, else its
 * dialable listen addresses (asked of the running daemon when there is one, since it knows its real
 * ports), then the addresses of other live members, so a joiner still gets in when this node is down.
 */
export async function bootstrapAddrs(
  dataDir: DataDir,
  config: NodeConfig,
  peerId: string,
): Promise<string[]> {
  const own: string[] = [];
  const others: string[] = [];
  let running = false;
  try {
    const control = await connectControl(dataDir);
    const { addrs } = await control.call<{ addrs: string[] }>('GET', '/addrs');
    const status = await control.call<FleetStatus>('GET', '/status');
    running = true;
    if (config.announce.length === 0) own.push(...addrs);
    for (const node of status.nodes) {
      if (node.peerId !== peerId)
        others.push(...node.addrs.slice(0, 2).map((a) => `${a}/p2p/${node.peerId}`));
    }
  } catch (err) {
    if (!(err instanceof NoDaemonError)) throw err;
  }
  if (config.announce.length > 0) {
    own.push(...config.announce.map((a) => (a.includes('/p2p/') ? a : `${a}/p2p/${peerId}`)));
  } else if (!running) {
    const listen = config.listen.length > 0 ? config.listen : [`/ip4/0.0.0.0/tcp/${DEFAULT_PORT}`];
    own.push(...dialableAddrs(listen).map((a) => `${a}/p2p/${peerId}`));
  }
  return [...new Set([...own, ...others])].slice(0, MAX_BOOTSTRAP);
}

export async function issueToken(options: {
  dataDir: DataDir;
  fleet: FleetFile;
  config: NodeConfig;
  peerId: string;
  ttlMs: number;
  /** Roles the certificate of whoever uses the token will grant (default: worker, submitter, collector). */
  roles?: InvitableRole[];
  now?: number;
}): Promise<{ token: string; bootstrap: string[]; expires: number; invitation: string }> {
  const now = options.now ?? Date.now();
  const authority = await loadAuthority(options.dataDir);
  if (!authority) {
    throw new Error(
      'only a node holding the fleet key signs invitations, and this one does not: ' +
        'run `vtnode token` on the node that created the fleet (`vtnode init`)',
    );
  }
  const chain = await verifyKeyChain(options.fleet.keys, options.fleet.fleet);
  const bootstrap = await bootstrapAddrs(options.dataDir, options.config, options.peerId);
  if (bootstrap.length === 0) {
    throw new Error(
      'this node has no dialable address to put in a token (it listens on an ephemeral port and is not running): ' +
        'start it, or pass --announce MULTIADDR',
    );
  }
  const invitation = await invite(authority, chain, {
    roles: options.roles ?? DEFAULT_ROLES,
    ttlMs: options.ttlMs,
    now,
  });
  const token = encodeToken({
    fleet: options.fleet.fleet,
    psk: options.fleet.psk,
    bootstrap,
    keys: [...chain.records],
    invitation,
  });
  return { token, bootstrap, expires: invitation.exp, invitation: invitation.nonce };
}
