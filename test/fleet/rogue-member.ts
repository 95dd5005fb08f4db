// A fleet member gone bad, for tests: it holds the fleet key, joins through the bootstrap node and
// publishes raw gossip on the advert topic that no honest vtnode would send. Run as its own process:
//   node test/fleet/rogue-member.ts <fleet> <psk> <bootstrap multiaddr>
import { generateKeyPair } from '@libp2p/crypto/keys';
import { multiaddr } from '@multiformats/multiaddr';
import { createHost } from '../../node/fleet/host.ts';
import { advertTopic } from '../../protocol/topics.ts';

const [fleet, psk, bootstrap] = process.argv.slice(2) as [string, string, string];
const topic = advertTopic(fleet);
const host = await createHost({
  privateKey: await generateKeyPair('Ed25519'),
  psk,
  listen: ['/ip4/127.0.0.1/tcp/0'],
  mdns: false,
  topics: [topic],
});
await host.start();
await host.dial(multiaddr(bootstrap), { signal: AbortSignal.timeout(10_000) });
const pubsub = host.services.pubsub;
pubsub.subscribe(topic);
const deadline = Date.now() + 20_000;
while (pubsub.getSubscribers(topic).length === 0) {
  if (Date.now() > deadline) {
    process.stdout.write('rogue: no subscriber\n');
    process.exit(3);
  }
  await new Promise((r) => setTimeout(r, 100));
}
const self = host.peerId.toString();
const encoder = new TextEncoder();
const valid = {
  v: 1,
  peerId: self,
  seq: 1,
  sentAt: Date.now(),
  leaving: false,
  version: '0.1.0',
  host: 'rogue',
  addrs: [],
  models: [],
  memory: { total: 1, free: 1, reserved: 0 },
  load: { queued: 0, running: 0, capacity: 0 },
  warm: [],
  workspaces: [],
  sandbox: { backend: 'none', ok: false },
  roles: ['worker'],
};
const bad: [string, Uint8Array][] = [
  ['not json', encoder.encode('{"v":1, this is not json')],
  ['wrong field types', encoder.encode(JSON.stringify({ ...valid, seq: 'many', memory: 'lots' }))],
  ['forged origin', encoder.encode(JSON.stringify({ ...valid, peerId: bootstrap.split('/p2p/')[1] }))],
  ['oversized', encoder.encode(JSON.stringify({ ...valid, host: 'x'.repeat(100_000) }))],
];
for (const [what, data] of bad) {
  const result = await pubsub.publish(topic, data).catch((err: Error) => err);
  process.stdout.write(`rogue: published ${what}: ${result instanceof Error ? result.message : 'ok'}\n`);
  await new Promise((r) => setTimeout(r, 200));
}
process.stdout.write('rogue: done\n');
process.on('SIGTERM', () => {
  void Promise.resolve(host.stop()).then(() => process.exit(0));
});
