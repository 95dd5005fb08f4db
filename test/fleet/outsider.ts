// Someone holding a fleet's pre-shared key but no valid membership certificate, for tests: it skips
// every check the CLI makes on its side and talks to the fleet directly, with the project's own
// modules. Run as its own process:
//   node test/fleet/outsider.ts invite TOKEN   present the token's invitation, as is, for a certificate
//   node test/fleet/outsider.ts squat TOKEN    no certificate: advertise, ask the bootstrap node's log
// It prints `outsider: …` lines for each outcome, and `outsider: disconnected after N ms` when the
// fleet hangs up on it.

import { generateKeyPair } from '@libp2p/crypto/keys';
import { multiaddr } from '@multiformats/multiaddr';
import { createHost } from '../../node/fleet/host.ts';
import { dialFramed } from '../../node/wire/streams.ts';
import { LogReply } from '../../protocol/fetch.ts';
import { AdmitReply, type AdmitRequest } from '../../protocol/membership.ts';
import { ADMIT_PROTOCOL, advertTopic, LOG_PROTOCOL } from '../../protocol/topics.ts';
import { bareAdvert } from '../helpers/adverts.ts';
import { tokenJson } from '../helpers/fleet.ts';

const [mode, token] = process.argv.slice(2) as ['invite' | 'squat', string];
const body = tokenJson(token);
const say = (line: string) => process.stdout.write(`outsider: ${line}\n`);
const topic = advertTopic(body.fleet);
const host = await createHost({
  privateKey: await generateKeyPair('Ed25519'),
  psk: body.psk,
  listen: ['/ip4/127.0.0.1/tcp/0'],
  mdns: false,
  topics: [topic],
});
await host.start();
const bootstrap = multiaddr(body.bootstrap[0]!);
await host.dial(bootstrap, { signal: AbortSignal.timeout(10_000) });
const connectedAt = Date.now();
say(`connected as ${host.peerId.toString()}`);
host.addEventListener('peer:disconnect', () => say(`disconnected after ${Date.now() - connectedAt} ms`));

if (mode === 'invite') {
  const wire = await dialFramed<typeof AdmitReply, AdmitRequest>(host, bootstrap, ADMIT_PROTOCOL, {
    schema: AdmitReply,
    signal: AbortSignal.timeout(10_000),
  });
  await wire.send({ v: 1, type: 'join', invitation: body.invitation });
  const reply = await wire.expect('an admission reply');
  say(reply.type === 'certificate' ? 'admitted' : `refused ${reply.code}: ${reply.reason}`);
} else {
  const pubsub = host.services.pubsub;
  pubsub.subscribe(topic);
  const advert = bareAdvert(host.peerId.toString(), 'outsider');
  const published = await pubsub.publish(topic, new TextEncoder().encode(JSON.stringify(advert))).then(
    (r) => `${r.recipients.length} recipient(s)`,
    (err: Error) => err.message,
  );
  say(`published an advert: ${published}`);
  try {
    const wire = await dialFramed<typeof LogReply>(host, bootstrap, LOG_PROTOCOL, { schema: LogReply });
    await wire.send({ v: 1, after: 0, limit: 10 });
    const reply = await wire.read({ signal: AbortSignal.timeout(20_000) });
    say(
      reply === undefined
        ? 'log stream refused: closed without an answer'
        : `log stream answered: ${JSON.stringify(reply).slice(0, 200)}`,
    );
  } catch (err) {
    say(`log stream refused: ${(err as Error).message}`);
  }
}
process.on('SIGTERM', () => {
  void Promise.resolve(host.stop()).then(() => process.exit(0));
});
