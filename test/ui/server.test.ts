import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createMetrics } from '../../node/metrics.ts';
import { startUiServer, type UiServer, type UiServerOptions } from '../../node/ui/server.ts';
import { parseSnapshot, type Snapshot } from '../../node/ui/snapshot-schema.ts';
import { TOKEN_COOKIE } from '../../node/ui/token.ts';
import { notYet, pollFor } from '../helpers/poll.ts';

const snap = (scored: number): Snapshot => ({
  v: 1,
  at: Date.now(),
  fleet: 'f',
  self: 'peer-self-12345678',
  nodes: [],
  campaigns: [
    {
      name: 'c',
      status: 'running',
      planned: 10,
      placed: 0,
      generated: scored,
      scored,
      verified: scored,
      progress: scored / 10,
      tokensPerSecond: null,
      cacheHitRate: null,
      etaMs: null,
      startedAt: 1,
      problem: null,
      nodes: [],
    },
  ],
  dataset: null,
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** An open /events stream: the events read so far, and a wait for the next one matching. */
function events(port: number, headers: Record<string, string> = {}) {
  const seen: { event: string; id: string; data: string }[] = [];
  const comments: string[] = [];
  const waiters: (() => void)[] = [];
  let close = () => {};
  const opened = new Promise<number>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/events', headers }, (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        for (let end = buf.indexOf('\n\n'); end >= 0; end = buf.indexOf('\n\n')) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          if (block.startsWith(':')) comments.push(block);
          const field = (name: string) =>
            block
              .split('\n')
              .filter((l) => l.startsWith(`${name}: `))
              .map((l) => l.slice(name.length + 2))
              .join('\n');
          if (field('data')) seen.push({ event: field('event'), id: field('id'), data: field('data') });
          for (const w of waiters.splice(0)) w();
        }
      });
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
    close = () => req.destroy();
  });
  const until = async (what: () => boolean, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!what()) {
      if (Date.now() > deadline)
        throw new Error(
          `timed out waiting for an event; ${seen.length} seen, the last: ${seen.at(-1)?.data.slice(0, 300) ?? 'none'}`,
        );
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 200);
      });
    }
  };
  return { seen, comments, opened, until, close: () => close() };
}

const servers: UiServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(over: Partial<UiServerOptions> & { state?: { scored: number } } = {}) {
  const state = over.state ?? { scored: 1 };
  const server = await startUiServer({
    port: 0,
    snapshot: () => snap(state.scored),
    registry: createMetrics({ processMetrics: false }).registry,
    intervalMs: 50,
    assets: async () => ({ js: 'console.log("page")', css: 'body{}' }),
    ...over,
  });
  servers.push(server);
  return { server, state };
}

describe('the web view server on loopback', () => {
  it('serves the page, its bundle, the state, metrics; 404 otherwise; GET only', async () => {
    const { server } = await serve();
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/`);
    const page = await get(server.port, '/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('<script type="module" src="app.js">');
    expect((await get(server.port, '/app.js')).body).toBe('console.log("page")');
    expect((await get(server.port, '/app.css')).headers['content-type']).toMatch(/^text\/css/);
    const state = await get(server.port, '/api/state');
    expect(parseSnapshot(state.body, '/api/state').campaigns[0]!.scored).toBe(1);
    const metrics = await get(server.port, '/metrics');
    expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
    expect(metrics.body).toContain('# TYPE vtnode_samples_generated_total counter');
    expect((await get(server.port, '/nope')).status).toBe(404);
    const post = await new Promise<number>((resolve) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: '/', method: 'POST' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.end();
    });
    expect(post).toBe(405);
  });

  it('refuses a Host that is not a loopback name (DNS rebinding)', async () => {
    const { server } = await serve();
    expect((await get(server.port, '/api/state', { host: 'evil.example' })).status).toBe(421);
    expect((await get(server.port, '/api/state', { host: `localhost:${server.port}` })).status).toBe(200);
  });

  it('an invalid snapshot is a 500 naming the field, never served', async () => {
    const { server } = await serve({ snapshot: () => ({ ...snap(1), v: 2 }) as unknown as Snapshot });
    const r = await get(server.port, '/api/state');
    expect(r.status).toBe(500);
    expect(r.body).toMatch(/the web view snapshot: v: /);
  });

  it('events: a snapshot on connect, one per change (none without), heartbeats, cleanup on disconnect', async () => {
    const { server, state } = await serve({ heartbeatMs: 100 });
    const a = events(server.port);
    expect(await a.opened).toBe(200);
    await a.until(() => a.seen.length >= 1);
    expect(a.seen[0]!.event).toBe('snapshot');
    expect(parseSnapshot(a.seen[0]!.data, 'event').campaigns[0]!.scored).toBe(1);
    // Heartbeats keep flowing while nothing changes; no snapshot is repeated meanwhile.
    await a.until(() => a.comments.length >= 3);
    expect(a.seen).toHaveLength(1);
    state.scored = 2;
    await a.until(() => a.seen.length >= 2);
    expect(parseSnapshot(a.seen[1]!.data, 'event').campaigns[0]!.scored).toBe(2);
    expect(Number(a.seen[1]!.id)).toBeGreaterThan(Number(a.seen[0]!.id));
    // A second client gets the current snapshot at once.
    const b = events(server.port);
    await b.until(() => b.seen.length >= 1);
    expect(parseSnapshot(b.seen[0]!.data, 'event').campaigns[0]!.scored).toBe(2);
    expect(server.clients()).toBe(2);
    a.close();
    b.close();
    await pollFor(() => server.clients() === 0 || notYet(`${server.clients()} clients`), {
      what: 'both pages to be gone',
      timeoutMs: 5000,
      pauseMs: 20,
    });
  });

  it('a page that connects after everyone left gets the state now, not the last one sent', async () => {
    const { server, state } = await serve({ intervalMs: 60_000 });
    const a = events(server.port);
    await a.until(() => a.seen.length >= 1);
    a.close();
    await pollFor(() => server.clients() === 0 || notYet(`${server.clients()} clients`), {
      what: 'the page to be gone',
      timeoutMs: 5000,
      pauseMs: 20,
    });
    state.scored = 7;
    const b = events(server.port);
    await b.until(() => b.seen.length >= 1);
    expect(parseSnapshot(b.seen[0]!.data, 'event').campaigns[0]!.scored).toBe(7);
    b.close();
  });

  it('refuses event streams beyond maxClients', async () => {
    const { server } = await serve({ maxClients: 1 });
    const a = events(server.port);
    await a.until(() => a.seen.length >= 1);
    expect((await get(server.port, '/events')).status).toBe(503);
    a.close();
  });

  it('close() ends open event streams and stops listening; so does the abort signal', async () => {
    const abort = new AbortController();
    const { server } = await serve({ signal: abort.signal });
    const a = events(server.port);
    await a.until(() => a.seen.length >= 1);
    abort.abort();
    await server.close();
    await expect(get(server.port, '/')).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('the web view server bound beyond loopback', () => {
  it('needs the token on every request: ?token= sets a cookie the page then uses; Bearer for scrapers', async () => {
    const { server } = await serve({ host: '0.0.0.0', token: 'sesame-0123456789' });
    expect(server.url).toMatch(new RegExp(`^http://[^/]+:${server.port}/\\?token=sesame-0123456789$`));
    expect(server.url).not.toContain('0.0.0.0');
    for (const path of ['/', '/app.js', '/api/state', '/metrics', '/events', '/nope']) {
      const r = await get(server.port, path);
      expect(r.status, path).toBe(403);
      expect(r.body).not.toContain('fleet');
    }
    expect((await get(server.port, '/api/state?token=sesame-012345678')).status).toBe(403);
    const page = await get(server.port, '/?token=sesame-0123456789');
    expect(page.status).toBe(200);
    const cookie = String(page.headers['set-cookie']);
    expect(cookie).toContain(`${TOKEN_COOKIE}=sesame-0123456789`);
    expect(cookie).toContain('HttpOnly');
    const jar = cookie.split(';')[0]!;
    expect((await get(server.port, '/app.js', { cookie: jar })).status).toBe(200);
    expect((await get(server.port, '/metrics', { authorization: 'Bearer sesame-0123456789' })).status).toBe(
      200,
    );
    expect((await get(server.port, '/metrics', { authorization: 'Bearer sesame' })).status).toBe(403);
    // Any Host is fine once the token is right (the address is meant for other machines).
    expect((await get(server.port, '/api/state', { host: 'studio.lan', cookie: jar })).status).toBe(200);
  });

  it('makes up a token when none is given', async () => {
    const { server } = await serve({ host: '0.0.0.0' });
    const token = new URL(server.url).searchParams.get('token')!;
    expect(token.length).toBeGreaterThanOrEqual(32);
    expect((await get(server.port, `/api/state?token=${token}`)).status).toBe(200);
  });
});
