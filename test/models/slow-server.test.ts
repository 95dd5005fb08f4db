// Model-server probes tell slow from down (issue 11, defect 9): a healthy server that answers late
// (a machine busy generating) keeps its models; a refused or reset connection is down at once; only
// timeouts in a row are down. Real HTTP servers on loopback.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createModelServerRegistry, type ServerState } from '../../node/models/registry.ts';
import { closedPort, fakeServer, json } from './fixtures.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An OpenAI-compatible server whose /v1/models answers after `delay()` ms (Infinity: never), counting requests. */
async function server(
  delay: () => number,
  extra: Record<string, (q: IncomingMessage, r: ServerResponse) => void> = {},
) {
  let requests = 0;
  const pending = new Set<NodeJS.Timeout>();
  const s = await fakeServer({
    'GET /v1/models': (_q, r) => {
      requests++;
      const ms = delay();
      if (ms === Number.POSITIVE_INFINITY) return;
      const t = setTimeout(() => {
        pending.delete(t);
        json(r, { data: [{ id: 'coder' }] });
      }, ms);
      pending.add(t);
    },
    ...extra,
  });
  cleanups.push(async () => {
    for (const t of pending) clearTimeout(t);
    await s.close();
  });
  return { url: s.url, requests: () => requests };
}

function registry(url: string, extra = {}) {
  const r = createModelServerRegistry({ urls: [url], intervalMs: 3_600_000, ...extra });
  cleanups.push(() => r.stop());
  const changes: ServerState[][] = [];
  r.onChange((states) => changes.push(states));
  return { r, changes };
}

describe('model server probes: slow is not down', () => {
  it('a healthy server that answers after 3.5 s is up: its 3 s probe times out, the next one has 6 s', async () => {
    const s = await server(() => 3500);
    const { r, changes } = registry(s.url);
    const started = Date.now();
    await r.ready;
    expect(r.models().map((m) => m.id)).toEqual(['coder']);
    expect(r.states()[0]).toMatchObject({ health: 'up', error: null });
    expect(s.requests()).toBe(2);
    // Never reported down on the way: the one change is "up".
    expect(changes.map((c) => c[0]!.server !== null)).toEqual([true]);
    expect(Date.now() - started).toBeLessThan(12_000);
  }, 30_000);

  it('a closed port is down at once, after one probe', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const { r } = registry(url);
    const started = Date.now();
    await r.ready;
    expect(Date.now() - started).toBeLessThan(2000);
    expect(r.states()[0]!.server).toBeNull();
    expect(r.states()[0]!.error).toMatch(/ECONNREFUSED/);
    expect(r.states()[0]!.health).toBe('down');
  });

  it('a server that resets the connection is down at once, after one probe', async () => {
    let requests = 0;
    const s = await fakeServer({
      'GET /v1/models': (q) => {
        requests++;
        q.socket.destroy();
      },
    });
    cleanups.push(() => s.close());
    const { r } = registry(s.url);
    await r.ready;
    expect(r.states()[0]!.server).toBeNull();
    expect(requests).toBe(1);
    expect(r.states()[0]!.health).toBe('down');
  });

  it('a server that turns slow keeps its models; one that stops answering is down after 3 timeouts in a row', async () => {
    let delay = 0;
    const s = await server(() => delay);
    const { r, changes } = registry(s.url, { timeoutMs: 200 });
    await r.ready;
    expect(changes.length).toBe(1);
    // Slow (300 ms against a 200 ms probe): the retry with 400 ms gets the answer; no change, still served.
    delay = 300;
    await r.refresh();
    expect(r.models().map((m) => m.id)).toEqual(['coder']);
    expect(changes.length).toBe(1);
    expect(r.states()[0]).toMatchObject({ health: 'up', error: null });
    // Gone silent: 200, 400, 800 ms probes time out, then it is down (its models withdrawn).
    delay = Number.POSITIVE_INFINITY;
    const before = s.requests();
    const started = Date.now();
    await r.refresh();
    expect(s.requests() - before).toBe(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    expect(r.states()[0]).toMatchObject({ health: 'down', server: null });
    expect(r.states()[0]!.error).toMatch(/no answer within 800 ms/);
    expect(r.models()).toEqual([]);
    expect(changes.length).toBe(2);
    // It answers again: up, with the base timeout.
    delay = 0;
    await r.refresh();
    expect(r.states()[0]).toMatchObject({ health: 'up' });
    expect(changes.length).toBe(3);
  }, 30_000);

  it('a slow kind-specific endpoint does not change the detected kind (the probe waits longer instead)', async () => {
    const s = await server(() => 0, {
      'GET /props': (_q, res) => {
        setTimeout(() => json(res, { default_generation_settings: { n_ctx: 4096 }, total_slots: 3 }), 300);
      },
    });
    const { r } = registry(s.url, { timeoutMs: 200 });
    await r.ready;
    const probed = r.servers()[0]!;
    expect(probed.behaviour).toBe('llama-server');
    expect(probed.concurrency).toBe(3);
  });
});
