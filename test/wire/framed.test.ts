import { generateKeyPair } from '@libp2p/crypto/keys';
import type { Stream } from '@libp2p/interface';
import { encode } from 'it-length-prefixed';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { newPsk } from '../../node/data-dir.ts';
import { createHost, type Host } from '../../node/fleet/host.ts';
import { type Framed, FrameError, framed } from '../../node/wire/framed.ts';
import { dialFramed, handleFramed } from '../../node/wire/streams.ts';
import { ParseError } from '../../protocol/parse.ts';

const Msg = z.object({ n: z.number().int(), text: z.string() });
type Msg = z.infer<typeof Msg>;

let server: Host;
let client: Host;
let serverAddr: ReturnType<Host['getMultiaddrs']>[number];

async function host(psk: string): Promise<Host> {
  return createHost({
    privateKey: await generateKeyPair('Ed25519'),
    psk,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    mdns: false,
    topics: [],
  });
}

beforeAll(async () => {
  const psk = newPsk();
  server = await host(psk);
  client = await host(psk);
  serverAddr = server.getMultiaddrs()[0]!;
});
afterAll(async () => {
  await client?.stop();
  await server?.stop();
});

/** A server-side handler whose outcome the test can await. */
function serve(
  protocol: string,
  body: (wire: Framed<Msg, unknown>) => Promise<void>,
  maxFrameBytes?: number,
) {
  let settle!: { resolve(v: unknown): void; reject(e: unknown): void };
  const outcome = new Promise((resolve, reject) => {
    settle = { resolve, reject };
  });
  const ready = handleFramed<typeof Msg, unknown>(
    server,
    protocol,
    async (wire) => {
      try {
        await body(wire);
        settle.resolve('ok');
      } catch (err) {
        settle.reject(err);
        throw err;
      }
    },
    { schema: Msg, maxFrameBytes },
  );
  return { ready, outcome };
}

const dial = (protocol: string, maxFrameBytes?: number, signal?: AbortSignal) =>
  dialFramed<typeof Msg, unknown>(client, serverAddr, protocol, { schema: Msg, maxFrameBytes, signal });

describe('framed JSON over a real libp2p stream', () => {
  it('carries messages both ways, large ones too, and closes cleanly on both sides', async () => {
    const s = serve('/test/echo/1', async (wire) => {
      for await (const m of wire) await wire.send({ n: m.n + 1, text: m.text });
    });
    await s.ready;
    const wire = await dial('/test/echo/1');
    const big = 'x'.repeat(300_000);
    for (let i = 0; i < 40; i++) {
      await wire.send({ n: i, text: i === 7 ? big : `m${i}` });
      const back = await wire.read();
      expect(back).toEqual({ n: i + 1, text: i === 7 ? big : `m${i}` });
    }
    await wire.closeWrite();
    expect(await wire.read()).toBeUndefined();
    await expect(s.outcome).resolves.toBe('ok');
    await wire.close();
  });

  it('names the peer, protocol, message and field of a malformed message, and the stream stays usable', async () => {
    const errors: string[] = [];
    const s = serve('/test/malformed/1', async (wire) => {
      for (;;) {
        try {
          const m = await wire.read();
          if (m === undefined) return;
          await wire.send({ n: m.n, text: 'ok' });
        } catch (err) {
          if (!(err instanceof ParseError)) throw err;
          errors.push(err.message);
          await wire.send({ n: -1, text: err.issues.map((i) => i.path).join(',') });
        }
      }
    });
    await s.ready;
    const wire = await dial('/test/malformed/1');
    await wire.send({ n: 'one', text: 7 });
    expect(await wire.read()).toEqual({ n: -1, text: 'n,text' });
    await wire.send({ n: 2, text: 'fine' });
    expect(await wire.read()).toEqual({ n: 2, text: 'ok' });
    await wire.closeWrite();
    expect(await wire.read()).toBeUndefined();
    await s.outcome;
    const clientId = client.peerId.toString();
    expect(errors).toEqual([expect.stringContaining(`/test/malformed/1 message #1 from ${clientId}: n: `)]);
  });

  it('rejects a frame that is not JSON or not UTF-8', async () => {
    const seen: string[] = [];
    const s = serve('/test/garbage/1', async (wire) => {
      for (let i = 0; i < 2; i++) {
        await wire.read().then(
          () => seen.push('parsed'),
          (err: Error) => seen.push(err.message),
        );
      }
    });
    await s.ready;
    const stream: Stream = await client.dialProtocol(serverAddr, '/test/garbage/1');
    await stream.sink([
      encode.single(new TextEncoder().encode('{"n": 1, oops')).subarray(),
      encode.single(new Uint8Array([0xff, 0xfe, 0x7b])).subarray(),
    ]);
    await s.outcome;
    expect(seen[0]).toMatch(/message #1 from .*: \(root\): not JSON/);
    expect(seen[1]).toMatch(/message #2 from .*: \(root\): not UTF-8 text/);
    await stream.close();
  });

  it('refuses to send an oversized message locally, and a receiver rejects an oversized frame and resets', async () => {
    const s = serve(
      '/test/big/1',
      async (wire) => {
        await wire.read(); // throws too-large: the handler aborts the stream
      },
      64 * 1024,
    );
    await s.ready;
    await server.handle('/test/small/1', ({ stream }) => {
      void stream.sink(stream.source);
    });
    const small = await dial('/test/small/1', 1024);
    await expect(small.send({ n: 1, text: 'y'.repeat(2000) })).rejects.toThrow(
      /refusing to send a 2\d{3}-byte message \(limit 1024 bytes\)/,
    );
    await small.send({ n: 2, text: 'still usable' });
    expect(await small.read()).toEqual({ n: 2, text: 'still usable' });
    await small.close();

    const wire = await dial('/test/big/1', 10 * 1024 * 1024);
    await wire.send({ n: 1, text: 'z'.repeat(200_000) });
    const err = await s.outcome.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FrameError);
    expect((err as FrameError).code).toBe('too-large');
    expect((err as FrameError).message).toBe(
      `/test/big/1 with ${client.peerId.toString()}: received a frame larger than 65536 bytes`,
    );
    const after = await wire.read().catch((e: unknown) => e);
    expect(after).toBeInstanceOf(FrameError);
    expect((after as FrameError).code).toBe('reset');
  });

  it('sees the remote close mid-conversation: clean end, end when a message was expected, cut mid-frame', async () => {
    const s = serve('/test/close/1', async (wire) => {
      await wire.send({ n: 1, text: 'a' });
      await wire.send({ n: 2, text: 'b' });
      await wire.close();
    });
    await s.ready;
    const wire = await dial('/test/close/1');
    expect(await wire.expect('first')).toEqual({ n: 1, text: 'a' });
    expect(await wire.read()).toEqual({ n: 2, text: 'b' });
    await expect(wire.expect('the end message')).rejects.toThrow(
      /\/test\/close\/1 with .*: remote closed the stream; expected the end message/,
    );
    await wire.close();

    // A raw server writes a length prefix promising 100 bytes, sends 10, and closes.
    await server.handle('/test/cut/1', ({ stream }) => {
      const frame = encode.single(new Uint8Array(100).fill(0x20)).subarray();
      void stream.sink([frame.subarray(0, 10)]).then(() => stream.close());
    });
    const cut = await dial('/test/cut/1');
    const err = await cut.read().catch((e: unknown) => e);
    expect((err as FrameError).code).toBe('truncated');
    expect((err as FrameError).message).toMatch(/stream ended in the middle of a frame/);
  });

  it('fails a waiting read when the remote host goes away mid-stream', async () => {
    const psk = newPsk();
    const [a, b] = [await host(psk), await host(psk)];
    try {
      let started!: () => void;
      const serving = new Promise<void>((r) => {
        started = r;
      });
      await handleFramed<typeof Msg, unknown>(
        a,
        '/test/vanish/1',
        async (wire) => {
          await wire.send({ n: 1, text: 'hello' });
          started();
          await new Promise(() => {}); // never answers again
        },
        { schema: Msg },
      );
      const wire = await dialFramed<typeof Msg, unknown>(b, a.getMultiaddrs()[0]!, '/test/vanish/1', {
        schema: Msg,
      });
      expect(await wire.read()).toEqual({ n: 1, text: 'hello' });
      await serving;
      const pending = wire.read().then(
        (v) => ({ value: v }),
        (e: unknown) => ({ error: e }),
      );
      await a.stop();
      const outcome = await pending;
      // The muxer going away ends the stream like a clean close: protocols that need to know
      // (the job protocol) have an explicit last message, and `expect` reports its absence.
      expect(outcome).toEqual({ value: undefined });
      await expect(wire.send({ n: 2, text: 'anyone?' })).rejects.toMatchObject({ code: 'closed' });
    } finally {
      await b.stop();
      await a.stop();
    }
  });

  it('aborts on a signal: a read that waits too long, and a stream-wide signal', async () => {
    const serverSaw: unknown[] = [];
    const s = serve('/test/slow/1', async (wire) => {
      serverSaw.push(await wire.read().catch((e: unknown) => e));
    });
    await s.ready;
    const wire = await dial('/test/slow/1');
    const err = await wire.read({ signal: AbortSignal.timeout(200) }).catch((e: unknown) => e);
    expect((err as FrameError).code).toBe('aborted');
    await s.outcome;
    expect((serverSaw[0] as FrameError).code).toBe('reset');
    await expect(wire.send({ n: 1, text: 'late' })).rejects.toMatchObject({ code: 'aborted' });

    const controller = new AbortController();
    const wire2 = await dial('/test/slow/1', undefined, controller.signal);
    const waiting = wire2.read().catch((e: unknown) => e);
    controller.abort(new Error('user pressed Ctrl-C'));
    const err2 = (await waiting) as FrameError;
    expect(err2.code).toBe('aborted');
    expect(err2.message).toMatch(/user pressed Ctrl-C/);

    // The stream-wide signal still covers reads after our side closed its writes.
    await server.handle('/test/mute/1', () => {});
    const controller3 = new AbortController();
    const wire3 = await dial('/test/mute/1', undefined, controller3.signal);
    await wire3.closeWrite();
    const waiting3 = wire3.read().catch((e: unknown) => e);
    controller3.abort(new Error('stop'));
    expect(((await waiting3) as FrameError).code).toBe('aborted');

    // An already-aborted signal aborts a new stream at once, and the remote sees a reset.
    const raw = await client.dialProtocol(serverAddr, '/test/mute/1');
    const wire4 = framed(raw, {
      schema: Msg,
      peer: 'p',
      protocol: '/x',
      signal: AbortSignal.abort(new Error('too late')),
    });
    await expect(wire4.read()).rejects.toMatchObject({
      code: 'aborted',
      message: expect.stringMatching(/too late/),
    });
    expect(raw.status).toBe('aborted');
  });

  it('aborts a graceful close that cannot finish because the remote never reads', async () => {
    await server.handle('/test/deaf/1', () => {}); // takes the stream, never reads it
    const wire = await dial('/test/deaf/1', 1024 * 1024);
    const chunk = 'q'.repeat(100_000);
    const sends = Array.from({ length: 40 }, (_, n) =>
      wire.send({ n, text: chunk }).then(
        () => 'sent',
        (e: FrameError) => e.code,
      ),
    );
    const err = await wire.close({ signal: AbortSignal.timeout(300) }).catch((e: unknown) => e);
    expect((err as FrameError).code).toBe('aborted');
    const outcomes = await Promise.all(sends);
    expect(outcomes).toContain('sent'); // the first frames fit in the muxer's window
    expect(outcomes.at(-1)).toBe('aborted'); // the rest never left
  });

  it('rejects a peer without the fleet key', async () => {
    const outsider = await host(newPsk());
    try {
      await expect(
        dialFramed(outsider, serverAddr, '/test/echo/1', { schema: Msg, signal: AbortSignal.timeout(3000) }),
      ).rejects.toThrow();
    } finally {
      await outsider.stop();
    }
  });
});

describe('framed over an in-memory duplex', () => {
  it('fails a read when the stream is used concurrently', async () => {
    const stream = {
      source: (async function* () {
        await new Promise(() => {});
      })(),
      sink: async () => {},
      abort: () => {},
      close: async () => {},
    } as unknown as Stream;
    const wire = framed(stream, { schema: Msg, peer: 'p', protocol: '/x' });
    void wire.read();
    await expect(wire.read()).rejects.toThrow(/read\(\) called while another read is waiting/);
  });
});
