// A model server that hangs (a SIGSTOPped process: connections accepted, nothing answered, probes
// included) is found down by its probes within seconds; its running requests must fail then, not
// after the request timeout (10 min by default), so the job fails and is placed elsewhere at once.
// Found by the multi-host drills (test/faults/drills.test.ts). Real HTTP server on loopback.
import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { SampleOutcome } from '../../node/models/adapter.ts';
import { createModelService } from '../../node/models/service.ts';
import { fakeServer, json } from './fixtures.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A server that answers /v1/models until `hang()`, then nothing; chat requests are never answered. */
async function hangingServer() {
  let hung = false;
  let chats = 0;
  const held = new Set<ServerResponse>();
  const s = await fakeServer({
    'GET /v1/models': (_q, r) => {
      if (hung) held.add(r);
      else json(r, { data: [{ id: 'coder' }] });
    },
    'POST /v1/chat/completions': (_q, r) => {
      chats++;
      held.add(r);
    },
  });
  cleanups.push(() => s.close());
  return { url: s.url, hang: () => (hung = true), chats: () => chats };
}

const request = (signal?: AbortSignal) => ({
  model: 'coder',
  messages: [{ role: 'user' as const, content: 'write it' }],
  k: 1,
  sampling: { maxTokens: 64 },
  ...(signal ? { signal } : {}),
});

async function first(it: AsyncIterable<SampleOutcome>): Promise<SampleOutcome> {
  for await (const o of it) return o;
  throw new Error('no outcome');
}

describe('a model server that hangs', () => {
  it('its running request fails once the probes find it down, long before the request timeout', async () => {
    const s = await hangingServer();
    const service = createModelService({
      urls: [s.url],
      intervalMs: 200,
      timeoutMs: 100,
      maxTimeoutMs: 400,
      adapter: { requestTimeoutMs: 60_000, retries: 0 },
    });
    cleanups.push(() => service.close());
    await service.registry.ready;
    expect(service.models().map((m) => m.id)).toEqual(['coder']);

    const outcome = first(service.generate(request()));
    await expect.poll(() => s.chats(), { timeout: 5000 }).toBe(1);
    const hungAt = Date.now();
    s.hang();
    const o = await outcome;
    expect(o.ok).toBe(false);
    expect(o.ok ? '' : o.error.message).toMatch(/the server is down .*request abandoned/);
    // Probes of 100 + 200 + 400 ms, then the next round: seconds, not the minute of the request timeout.
    expect(Date.now() - hungAt).toBeLessThan(10_000);
    expect(service.models()).toEqual([]);
  }, 20_000);

  it('while it is down, a request the adapter already holds fails without being sent', async () => {
    const s = await hangingServer();
    const service = createModelService({
      urls: [s.url],
      intervalMs: 200,
      timeoutMs: 100,
      maxTimeoutMs: 400,
      adapter: { requestTimeoutMs: 60_000, retries: 0 },
    });
    cleanups.push(() => service.close());
    await service.registry.ready;
    const adapter = service.adapterFor('coder')!;
    s.hang();
    await expect.poll(() => service.models().length, { timeout: 10_000 }).toBe(0);
    const o = await first(adapter.generate(request()));
    expect(o.ok ? '' : o.error.message).toMatch(/the server is down/);
    expect(s.chats()).toBe(0);
  }, 20_000);
});
