// A fleet member gone bad, for tests: admitted with a real token (it holds a valid certificate),
// it connects to the bootstrap node and publishes raw gossip on the advert topic that no honest
// vtnode would send. Run as its own process:
//   node test/fleet/rogue-member.ts <token> <data dir> [adverts|certificates]
// Each set stays under the invalid-message budget that gets a peer graylisted (its score drops
// after a few rejections and the rest would go unread): run one process per set.

import { multiaddr } from '@multiformats/multiaddr';
import { acceptToken } from '../../cli/commands/join.ts';
import { DataDir } from '../../node/data-dir.ts';
import { startMemberHost } from '../../node/membership/member-host.ts';
import { advertTopic } from '../../protocol/topics.ts';
import { bareAdvert } from '../helpers/adverts.ts';

const [token, dir, set = 'adverts'] = process.argv.slice(2) as [string, string, string?];
const dataDir = new DataDir(dir);
const fleet = await acceptToken(dataDir, token);
const topic = advertTopic(fleet.fleet);
const { host, state, membership } = await startMemberHost({
  dataDir,
  privateKey: (await dataDir.identity()).privateKey,
  listen: ['/ip4/127.0.0.1/tcp/0'],
  mdns: false,
  topics: [topic],
});
const bootstrap = fleet.bootstrap[0]!;
await host.dial(multiaddr(bootstrap), { signal: AbortSignal.timeout(10_000) });
const pubsub = host.services.pubsub;
pubsub.subscribe(topic);
const deadline = Date.now() + 20_000;
while (pubsub.getSubscribers(topic).length === 0 || !membership.certificate()) {
  if (Date.now() > deadline) {
    process.stdout.write('rogue: no subscriber or no certificate\n');
    process.exit(3);
  }
  await new Promise((r) => setTimeout(r, 100));
}
const self = host.peerId.toString();
const encoder = new TextEncoder();
const valid = bareAdvert(self, 'rogue');
const adverts: [string, Uint8Array][] = [
  ['not json', encoder.encode('{"v":1, this is not json')],
  ['wrong field types', encoder.encode(JSON.stringify({ ...valid, seq: 'many', memory: 'lots' }))],
  ['forged origin', encoder.encode(JSON.stringify({ ...valid, peerId: bootstrap.split('/p2p/')[1] }))],
  ['oversized', encoder.encode(JSON.stringify({ ...valid, host: 'x'.repeat(100_000) }))],
];
// Certificates are public (adverts carry them), but one counts only for the peer it names.
const certificates: [string, Uint8Array][] = [
  [
    "another member's certificate",
    encoder.encode(JSON.stringify({ ...valid, cert: state.certificateOf(bootstrap.split('/p2p/')[1]!) })),
  ],
  [
    'its certificate with a role added',
    encoder.encode(
      JSON.stringify({ ...valid, cert: { ...membership.certificate()!, roles: ['worker', 'admin'] } }),
    ),
  ],
];
for (const [what, data] of set === 'certificates' ? certificates : adverts) {
  const result = await pubsub.publish(topic, data).catch((err: Error) => err);
  process.stdout.write(`rogue: published ${what}: ${result instanceof Error ? result.message : 'ok'}\n`);
  await new Promise((r) => setTimeout(r, 200));
}
process.stdout.write('rogue: done\n');
process.on('SIGTERM', () => {
  void Promise.resolve(host.stop()).then(() => process.exit(0));
});
