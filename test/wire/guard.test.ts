// Stream protocol misuse over real libp2p: malformed, oversized and truncated frames and streams
// that never send their request count as offences; at the threshold the peer is banned (streams
// refused, connection closed, redial refused) while an honest peer is served throughout.
import { generateKeyPair } from '@libp2p/crypto/keys';
import { encode } from 'it-length-prefixed';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { newPsk } from '../../node/data-dir.ts';
import { createHost, type Host } from '../../node/fleet/host.ts';
import { createOffenceLedger } from '../../node/wire/offences.ts';
import { dialFramed, guardStreams, handleFramed } from '../../node/wire/streams.ts';
import { eventually } from '../helpers/cli.ts';

const Msg = z.object({ n: z.number().int() });
const PROTOCOL = '/vtnode/test-guard/1';
const psk = newPsk();
const ledger = createOffenceLedger({ threshold: 3, windowMs: 60_000, banMs: 60_000 });
const bans: string[] = [];
let server: Host;
let honest: Host;
let served = 0;

async function host(denyPeer?: (peer: string) => boolean): Promise<Host> {
  const h = await createHost({
    privateKey: await generateKeyPair('Ed25519'),
    psk,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    mdns: false,
    topics: [],
    ...(denyPeer ? { denyPeer } : {}),
  });
  await h.start();
  return h;
}

beforeAll(async () => {
  server = await host((peer) => ledger.banned(peer, Date.now()));
  guardStreams(server, {
    ledger,
    firstFrameTimeoutMs: 300,
    onBan: (peer) => {
      bans.push(peer);
      void server.hangUp(server.getConnections().find((c) => c.remotePeer.toString() === peer)!.remotePeer);
    },
  });
  await handleFramed<typeof Msg, { n: number }>(
    server,
    PROTOCOL,
    async (wire) => {
      const m = await wire.expect('a number');
      served++;
      await wire.send({ n: m.n + 1 });
    },
    { schema: Msg, maxFrameBytes: 1024 },
  );
  honest = await host();
});
afterAll(async () => {
  await honest?.stop();
  await server?.stop();
});

async function ask(from: Host, n: number): Promise<number> {
  const wire = await dialFramed<typeof Msg, { n: number }>(from, server.getMultiaddrs()[0]!, PROTOCOL, {
    schema: Msg,
    signal: AbortSignal.timeout(10_000),
  });
  await wire.send({ n });
  const reply = await wire.expect('a reply');
  await wire.close();
  return reply.n;
}

/** Opens a raw stream to the server and sends `bytes` as they are, then closes (or not). */
async function raw(from: Host, bytes: Uint8Array[], close = true): Promise<void> {
  const stream = await from.dialProtocol(server.getMultiaddrs()[0]!, PROTOCOL, {
    signal: AbortSignal.timeout(10_000),
  });
  const sink = stream.sink(
    (async function* () {
      for (const b of bytes) yield b;
      if (!close) await new Promise((r) => setTimeout(r, 5000));
    })(),
  );
  await Promise.race([sink.catch(() => {}), new Promise((r) => setTimeout(r, 2000))]);
}

const frame = (text: string) => encode.single(new TextEncoder().encode(text)).subarray();

describe('stream guard', () => {
  it.each([
    ['wrong types', [frame('{"n":"many"}')]],
    ['not JSON', [frame('{"n": 1, this is not json')]],
    ['oversized', [frame(JSON.stringify({ n: 1, pad: 'x'.repeat(5000) }))]],
    ['truncated', [frame('{"n":1}').subarray(0, 4)]],
  ])(
    'bans a peer after three offences of one kind (%s); an honest peer is served throughout',
    async (_, bytes) => {
      const bad = await host();
      const id = bad.peerId.toString();
      for (let i = 0; i < 3; i++) {
        expect(await ask(honest, i)).toBe(i + 1);
        await raw(bad, bytes).catch(() => {});
      }
      await eventually(async () => bans.includes(id), 10_000, `${id} to be banned`);
      expect(ledger.list(Date.now()).find((e) => e.peer === id)).toMatchObject({ bans: 1 });
      await eventually(async () => server.getConnections(bad.peerId).length === 0, 10_000, 'the hang-up');
      // A banned peer cannot come back: the gater refuses its connection.
      await expect(ask(bad, 1)).rejects.toThrow();
      expect(await ask(honest, 41)).toBe(42);
      await bad.stop();
    },
    60_000,
  );

  it('a stream that never sends its request is cut at the deadline and counts as an offence', async () => {
    const slow = await host();
    const before = served;
    for (let i = 0; i < 3; i++) await raw(slow, [new Uint8Array([5])], false).catch(() => {});
    await eventually(async () => bans.includes(slow.peerId.toString()), 15_000, 'the slow peer to be banned');
    expect(ledger.list(Date.now()).find((e) => e.peer === slow.peerId.toString())?.lastWhy).toMatch(
      /a stream without its request on \/vtnode\/test-guard\/1/,
    );
    expect(served).toBe(before);
    expect(await ask(honest, 1)).toBe(2);
    await slow.stop();
  }, 60_000);
});
