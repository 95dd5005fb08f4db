import { createServer, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SSE_HEARTBEAT, SseClient, sseFrame } from '../../node/ui/sse.ts';

describe('SSE framing', () => {
  it('one data line per line of data, event and id first, a blank line last', () => {
    expect(sseFrame('{"a":1}')).toBe('data: {"a":1}\n\n');
    expect(sseFrame('x', 'snapshot', 7)).toBe('event: snapshot\nid: 7\ndata: x\n\n');
    // Every newline convention splits, so no line of the payload can end the event early.
    expect(sseFrame('a\nb\r\nc\rd')).toBe('data: a\ndata: b\ndata: c\ndata: d\n\n');
    expect(sseFrame('a\n\nb')).toBe('data: a\ndata: \ndata: b\n\n');
    expect(sseFrame('')).toBe('data: \n\n');
  });

  it('refuses a newline in the event name or id (it would inject fields)', () => {
    expect(() => sseFrame('x', 'snap\ndata: evil')).toThrow(/event holds a newline/);
    expect(() => sseFrame('x', 'snapshot', '1\r2')).toThrow(/id holds a newline/);
  });

  it('a heartbeat is a comment: no event', () => {
    expect(SSE_HEARTBEAT.startsWith(':')).toBe(true);
    expect(SSE_HEARTBEAT.endsWith('\n\n')).toBe(true);
  });
});

describe('a slow client', () => {
  let close: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await close?.();
    close = null;
  });

  it('holds at most one waiting snapshot while its socket is full, and gets the newest once it reads', async () => {
    let client!: SseClient;
    let response!: ServerResponse;
    const connected = new Promise<void>((resolve) => {
      const server = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        response = res;
        client = new SseClient(res);
        resolve();
      });
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        const req = request({ host: '127.0.0.1', port, path: '/' }, (res) => {
          // The reader does not read until told to.
          res.pause();
          reader.resolve(res);
        });
        req.end();
      });
      close = async () => {
        response?.destroy();
        await new Promise((r) => server.close(r));
      };
    });
    const reader = Promise.withResolvers<import('node:http').IncomingMessage>();
    await connected;
    const res = await reader.promise;

    // Big snapshots until the socket's buffers are full and the client falls behind.
    const big = (n: number) => sseFrame(`${n}:${'x'.repeat(256 * 1024)}`, 'snapshot', n);
    let n = 0;
    while (!client.behind && n < 10_000) client.snapshot(big(++n));
    expect(client.behind).toBe(true);
    const sentBeforeBehind = n;
    // Many more updates while behind: one waits (the newest), the others are skipped.
    for (let i = 0; i < 50; i++) client.snapshot(big(++n));
    expect(client.skipped).toBe(49);
    expect(client.waitingBytes).toBe(Buffer.byteLength(big(n)));
    // Heartbeats are not queued for a client that is behind.
    client.heartbeat();
    expect(client.waitingBytes).toBe(Buffer.byteLength(big(n)));

    // The reader catches up: it gets every snapshot sent before it fell behind, then the newest.
    const ids: number[] = [];
    let buffered = '';
    const done = new Promise<void>((resolve) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffered += chunk;
        for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
          const id = /^id: (\d+)$/m.exec(buffered.slice(0, end));
          if (id) ids.push(Number(id[1]));
          buffered = buffered.slice(end + 2);
        }
        if (ids.at(-1) === n) resolve();
      });
    });
    res.resume();
    await done;
    expect(ids).toEqual([...Array.from({ length: sentBeforeBehind }, (_, i) => i + 1), n]);
    expect(client.behind).toBe(false);
    expect(client.waitingBytes).toBe(0);
  });
});
