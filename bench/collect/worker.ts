// Worker side of bench/collect.ts: fills a sample log with N samples (~2 KiB candidates, digests
// signed), serves /vtnode/sample/2 and /vtnode/log/2, and on the line `publish` on stdin gossips every digest.
import { generateKeyPair } from '@libp2p/crypto/keys';
import { createDigestGossip } from '../../node/digests/gossip.ts';
import { createLogServer, createSampleServer, logBodies, logDigests } from '../../node/digests/servers.ts';
import { digestSigner } from '../../node/digests/signature.ts';
import { createHost } from '../../node/fleet/host.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { digestTopic } from '../../protocol/topics.ts';
import { sampleBody } from '../../test/helpers/samples.ts';

const [psk, fleetId, logPath, count] = process.argv.slice(2);
const privateKey = await generateKeyPair('Ed25519');
const host = await createHost({
  privateKey,
  psk: psk!,
  listen: ['/ip4/127.0.0.1/tcp/0'],
  mdns: false,
  topics: [digestTopic(fleetId!)],
});
await host.start();
const log = openSampleLog({
  path: logPath!,
  origin: host.peerId.toString(),
  signer: digestSigner(privateKey),
});
const filler = 'x'.repeat(2000);
for (let i = log.counts().samples; i < Number(count); i++)
  log.append(
    sampleBody(`task-${i % 500}`, 'qwen', i, {
      reward: i % 3 === 0 ? 0 : 1,
      candidate: `// ${i}\nexport const f = () => ${i}; // ${filler}\n`,
    }),
  );
await createSampleServer({ host, source: logBodies(log) });
await createLogServer({ host, source: logDigests(log) });
const gossip = createDigestGossip({ host, fleetId: fleetId! });
process.stdout.write(`ready ${host.getMultiaddrs()[0]!.toString()}\n`);
process.stdin.setEncoding('utf8');
process.stdin.on('data', async (line: string) => {
  if (!line.includes('publish')) return;
  const n = log.counts().highWater;
  for (let after = 0; after < n; after += 500)
    for (const d of log.digestsSince(after, 500)) await gossip.publish(d);
  process.stdout.write(`published ${gossip.counts().published}\n`);
});
process.stdin.on('end', () => {
  void Promise.resolve(host.stop()).then(() => process.exit(0));
});
