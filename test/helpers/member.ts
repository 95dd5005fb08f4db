// A fleet member in the test process, admitted with a real token: its own data dir and identity,
// a member host (the same module a daemon uses) connected to a node and holding its certificate.
import type { PeerId, PrivateKey } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { multiaddr } from '@multiformats/multiaddr';
import { acceptToken } from '../../cli/commands/join.ts';
import { DataDir } from '../../node/data-dir.ts';
import type { Host } from '../../node/fleet/host.ts';
import { startMemberHost } from '../../node/membership/member-host.ts';
import type { MembershipService } from '../../node/membership/service.ts';
import type { Certificate } from '../../protocol/membership.ts';
import { eventually, type Sandbox } from './cli.ts';

export interface TestMember {
  host: Host;
  peerId: string;
  privateKey: PrivateKey;
  membership: MembershipService;
  cert: Certificate;
  /** The node it connected to. */
  node: PeerId;
  /** Stops the membership service (its state flushed to disk) and then the host. */
  stop(): Promise<void>;
}

export interface MemberOptions {
  /** The fleet's join token. */
  token: string;
  /** The node's multiaddr, ending in /p2p/<peer id>. */
  addr: string;
  /** Gossip topics besides the revocation topic. */
  topics: string[];
}

/** Admits a fresh member with `token`, connects it to the node at `addr`, waits for its certificate. */
export async function admitMember(box: Sandbox, options: MemberOptions): Promise<TestMember> {
  const dataDir = new DataDir(await box.tempDir('vt-member-'));
  await acceptToken(dataDir, options.token);
  const { privateKey, peerId } = await dataDir.identity();
  const { host, membership } = await startMemberHost({
    dataDir,
    privateKey,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    mdns: false,
    topics: options.topics,
  });
  try {
    const ma = multiaddr(options.addr);
    await host.dial(ma, { signal: AbortSignal.timeout(10_000) });
    const cert = await eventually(async () => membership.certificate(), 20_000, `${peerId}'s certificate`);
    const stop = async () => {
      await membership.stop();
      await host.stop();
    };
    const node = peerIdFromString(ma.getPeerId()!);
    return { host, peerId: peerId.toString(), privateKey, membership, cert, node, stop };
  } catch (err) {
    await membership.stop();
    await host.stop();
    throw err;
  }
}
