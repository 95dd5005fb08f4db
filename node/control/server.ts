import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type DataDir, writePrivate } from '../data-dir.ts';
import { logger } from '../logger.ts';

/**
 * A control route: returns the JSON to send, or throws an Error whose message goes back as 400. A
 * route that returns a `ControlStream` answers with newline-delimited JSON, one line per value, until
 * the iterable ends or the client goes away (the signal aborts).
 */
export type ControlHandler = (body: unknown, signal: AbortSignal) => Promise<unknown> | unknown;

/** What a streaming route returns: the values to send as NDJSON lines. */
export class ControlStream {
  readonly values: AsyncIterable<unknown>;
  constructor(values: AsyncIterable<unknown>) {
    this.values = values;
  }
}

/** Writes a stream's values as NDJSON lines, honouring back-pressure, until it ends or the client leaves. */
async function sendStream(res: ServerResponse, stream: ControlStream, signal: AbortSignal): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
  for await (const value of stream.values) {
    if (signal.aborted) break;
    if (!res.write(`${JSON.stringify(value)}\n`)) await new Promise((r) => res.once('drain', r));
  }
  res.end();
}

export interface ControlServerOptions {
  /** The data dir where `control.json` (port, token, pid; owner-only) is written. */
  dataDir: DataDir;
  /** Routes by "METHOD /path". */
  routes: Record<string, ControlHandler>;
}

export interface ControlServer {
  readonly port: number;
  close(): Promise<void>;
}

const MAX_BODY = 16 * 1024 * 1024;

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new Error('request body too large');
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function send(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The daemon's local control channel: HTTP on a loopback port, every request carrying the bearer
 * token from `control.json`, which only the data dir's owner can read.
 */
export async function startControlServer(options: ControlServerOptions): Promise<ControlServer> {
  const log = logger('vtnode:control');
  const token = randomBytes(32).toString('hex');
  const expected = Buffer.from(`Bearer ${token}`);
  const server: Server = createServer((req, res) => {
    const given = Buffer.from(req.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      send(res, 401, { error: 'missing or wrong control token' });
      return;
    }
    const route = options.routes[`${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`];
    if (!route) {
      send(res, 404, { error: `no route ${req.method} ${req.url}` });
      return;
    }
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    readBody(req)
      .then((body) => route(body, abort.signal))
      .then((value) =>
        value instanceof ControlStream ? sendStream(res, value, abort.signal) : send(res, 200, value ?? {}),
      )
      .then(
        () => {},
        (err: Error) => {
          log('control request %s %s failed: %s', req.method, req.url, err.message);
          if (!res.headersSent) send(res, 400, { error: err.message });
          else res.destroy(err);
        },
      );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  await writePrivate(
    options.dataDir.path('control.json'),
    `${JSON.stringify({ port, token, pid: process.pid })}\n`,
  );
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
