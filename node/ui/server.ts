import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Registry } from 'prom-client';
import { logger } from '../logger.ts';
import { loadAssets, type UiAssets } from './assets.ts';
import { changed } from './snapshot.ts';
import { checkSnapshot, type Snapshot } from './snapshot-schema.ts';
import { SseClient, sseFrame } from './sse.ts';
import { isLoopback, newToken, requestToken, TOKEN_COOKIE, tokenMatches } from './token.ts';

export interface UiServerOptions {
  /** Interface to bind (default 127.0.0.1); any other address requires the token on every request. */
  host?: string;
  /** TCP port (0: any free one). */
  port: number;
  /** The access token when bound beyond loopback (default: a new random one). Unused on loopback. */
  token?: string;
  /** Builds the current snapshot from the node's state. */
  snapshot: () => Snapshot | Promise<Snapshot>;
  /** The registry /metrics serves (Prometheus text format). */
  registry: Registry;
  /** How often the snapshot is rebuilt while a page is connected, and sent when it changed, ms (default 1000). */
  intervalMs?: number;
  /** A comment line on every event stream this often, ms (default 15000). */
  heartbeatMs?: number;
  /** Event streams open at once; more are refused with 503 (default 32). */
  maxClients?: number;
  /** The page's script and style (default: the prebuilt bundle, else esbuild in memory). */
  assets?: () => Promise<UiAssets>;
  /** Aborting it closes the server and every event stream. */
  signal?: AbortSignal;
}

export interface UiServer {
  /** The address to open: loopback, or with `?token=` when bound elsewhere. */
  readonly url: string;
  readonly port: number;
  /** Event streams open now. */
  clients(): number;
  close(): Promise<void>;
}

const PAGE = (title: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title><link rel="stylesheet" href="app.css"></head>
<body><div id="app">Loading…</div><script type="module" src="app.js"></script></body></html>
`;

/** The host to put in a clickable address for a bind address. */
export function displayHost(bind: string): string {
  let host = bind;
  if (bind === '0.0.0.0' || bind === '::') {
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    host = external?.address ?? '127.0.0.1';
  }
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * The web view's HTTP server: the page and its bundle, /events (server-sent events: a snapshot on
 * connect, then one on each change, heartbeats), /api/state (the same snapshot as JSON) and /metrics.
 * Bound to loopback by default; bound elsewhere, every request needs the token.
 */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const log = logger('vtnode:ui');
  const host = options.host ?? '127.0.0.1';
  const token = isLoopback(host) ? null : (options.token ?? newToken());
  const assets = options.assets ?? loadAssets;
  const maxClients = options.maxClients ?? 32;
  const clients = new Map<ServerResponse, SseClient>();
  let last: Snapshot | null = null;
  let lastFrame = '';
  let eventId = 0;

  const build = async (): Promise<Snapshot> =>
    checkSnapshot(await options.snapshot(), 'the web view snapshot');

  const refresh = async (): Promise<void> => {
    const next = await build();
    if (!changed(last, next)) return;
    last = next;
    lastFrame = sseFrame(JSON.stringify(next), 'snapshot', ++eventId);
    for (const client of clients.values()) client.snapshot(lastFrame);
  };

  let refreshing: Promise<void> | null = null;
  const tick = () => {
    if (clients.size === 0 || refreshing) return;
    refreshing = refresh()
      .catch((err: Error) => log.warn(`building the web view's snapshot failed: ${err.message}`))
      .finally(() => {
        refreshing = null;
      });
  };
  const ticker = setInterval(tick, options.intervalMs ?? 1000);
  const heartbeat = setInterval(() => {
    for (const client of clients.values()) client.heartbeat();
  }, options.heartbeatMs ?? 15_000);

  async function events(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A full snapshot on connect: the one every client has, or, when no page was connected (nothing
    // refreshed it meanwhile), a fresh one. Built before this client joins the broadcast list, so it
    // is not sent twice.
    if (!last || clients.size === 0) await refresh();
    if (res.destroyed) return;
    if (clients.size >= maxClients) return send(res, 503, 'text/plain', 'too many open event streams\n');
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
    });
    res.write('retry: 2000\n\n');
    const client = new SseClient(res);
    clients.set(res, client);
    const drop = () => clients.delete(res);
    req.once('close', drop);
    res.once('close', drop);
    client.snapshot(lastFrame);
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://ui.invalid');
    // Without a token, only loopback names are served: a web site that rebinds its DNS name to
    // 127.0.0.1 cannot read the node's state through the visitor's browser.
    if (token === null && !isLoopback(hostOf(req.headers.host)))
      return send(res, 421, 'text/plain', 'this address serves loopback host names only\n');
    if (token !== null) {
      const given = requestToken(url, {
        authorization: req.headers.authorization,
        cookie: req.headers.cookie,
      });
      if (!tokenMatches(given, token)) return send(res, 403, 'text/plain', 'a valid ?token= is required\n');
      // The page's own requests (script, style, events) carry the token as a cookie.
      res.setHeader('set-cookie', `${TOKEN_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`);
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'text/plain', 'GET only\n');
    switch (url.pathname) {
      case '/':
        return send(res, 200, 'text/html; charset=utf-8', PAGE('vtnode'));
      case '/app.js':
        return send(res, 200, 'text/javascript; charset=utf-8', (await assets()).js);
      case '/app.css':
        return send(res, 200, 'text/css; charset=utf-8', (await assets()).css);
      case '/api/state':
        return send(res, 200, 'application/json', JSON.stringify(await build()));
      case '/metrics':
        return send(res, 200, options.registry.contentType, await options.registry.metrics());
      case '/events':
        return events(req, res);
      default:
        return send(res, 404, 'text/plain', 'not found\n');
    }
  }

  const server = createServer((req, res) => {
    route(req, res).catch((err: Error) => {
      log.warn(`${req.method} ${req.url?.split('?')[0]} failed: ${err.message}`);
      if (!res.headersSent) send(res, 500, 'text/plain', `${err.message}\n`);
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${displayHost(host)}:${port}/${token ? `?token=${token}` : ''}`;

  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      clearInterval(ticker);
      clearInterval(heartbeat);
      for (const res of clients.keys()) res.end();
      clients.clear();
      server.close(() => resolve());
      server.closeAllConnections();
    });
    return closing;
  };
  options.signal?.addEventListener('abort', () => void close(), { once: true });
  if (options.signal?.aborted) await close();
  return { url, port, clients: () => clients.size, close };
}

/** The host name of a Host header (`[::1]:80` → `::1`, `localhost:80` → `localhost`). */
export function hostOf(header: string | undefined): string {
  if (!header) return '';
  if (header.startsWith('[')) return header.slice(1, header.indexOf(']'));
  return header.split(':')[0]!;
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}
