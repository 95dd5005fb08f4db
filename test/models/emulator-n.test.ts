import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type EmulatorOptions } from '../../node/model-server/emulator.ts';
import { probeServer } from '../../node/models/probe.ts';
import { makeFixtureTasks } from './fixtures.ts';

let fixture: Awaited<ReturnType<typeof makeFixtureTasks>>;
const open: { close: () => Promise<void> }[] = [];
const MODEL = 'vtnode-emulated-coder';

beforeAll(async () => {
  fixture = await makeFixtureTasks(1, 8000);
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function emulator(options: Partial<EmulatorOptions> & Pick<EmulatorOptions, 'emulate'>) {
  const e = await createEmulator({ tasks: fixture.tasks, timeScale: 0, script: 'mixed', ...options });
  open.push(e);
  return { e, client: new OpenAI({ baseURL: `${e.url}/v1`, apiKey: 'x', maxRetries: 0 }) };
}

const messages = () => fixture.tasks[0]!.messages.map((m) => ({ role: m.role, content: m.content }));

async function post(url: string, body: unknown) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

describe('the emulator and n, as each server does it', () => {
  it('vllm: n choices in one object, usage summed over them, the prompt counted once', async () => {
    const { e } = await emulator({ emulate: 'vllm', concurrency: 4 });
    const r = (await post(e.url, { model: MODEL, messages: messages(), n: 3, seed: 10 })) as {
      status: number;
      body: { choices: { index: number; message: { content: string } }[]; usage: Record<string, number> };
    };
    expect(r.status).toBe(200);
    expect(r.body.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    const tokens = r.body.choices.reduce(
      (s, c) => s + Math.max(1, Math.ceil(c.message.content.length / 4)),
      0,
    );
    expect(r.body.usage.completion_tokens).toBe(tokens);
    expect(e.stats().promptTokens).toBe(r.body.usage.prompt_tokens);
    expect([e.stats().requests, e.stats().samples]).toEqual([1, 3]);
    expect((await probeServer(e.url)).behaviour).toBe('vllm');
  });

  it('llama-server: one result per choice (an array), seeds seed + i, and a 400 above its slots', async () => {
    const { e, client } = await emulator({ emulate: 'llama-server', concurrency: 2 });
    const r = (await post(e.url, { model: MODEL, messages: messages(), n: 2, seed: 10 })) as {
      status: number;
      body: {
        choices: { index: number; message: { content: string } }[];
        usage: { prompt_tokens_details: { cached_tokens: number } };
      }[];
    };
    expect(r.status).toBe(200);
    expect(e.stats().maxRunning).toBe(2); // one slot per choice, as llama-server runs n's children
    expect(r.body.map((p) => p.choices[0]!.index)).toEqual([0, 1]);
    expect(r.body[1]!.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0); // the child copied the parent's prompt
    for (const [i, part] of r.body.entries()) {
      const single = await client.chat.completions.create({
        model: MODEL,
        messages: messages(),
        seed: 10 + i,
      });
      expect(part.choices[0]!.message.content).toBe(single.choices[0]!.message.content);
    }
    const before = e.stats().requests;
    const refused = (await post(e.url, { model: MODEL, messages: messages(), n: 3 })) as {
      status: number;
      body: { error: { message: string; type: string } };
    };
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({
      message: 'n_cmpl cannot be greater than the number of slots, please increase -np',
      type: 'invalid_request_error',
    });
    expect(e.stats().requests).toBe(before);
  });

  for (const emulate of ['ollama', 'mlx'] as const)
    it(`${emulate}: ignores n (one choice, no error)`, async () => {
      const { e } = await emulator({ emulate, concurrency: 4 });
      const r = (await post(e.url, { model: MODEL, messages: messages(), n: 3, seed: 1 })) as {
        status: number;
        body: { choices: unknown[] };
      };
      expect(r.status).toBe(200);
      expect(r.body.choices).toHaveLength(1);
      expect([e.stats().requests, e.stats().samples]).toEqual([1, 1]);
    });
});

describe('in-flight prefill sharing', () => {
  async function twoAtOnce(options: Partial<EmulatorOptions> & Pick<EmulatorOptions, 'emulate'>) {
    const { e, client } = await emulator({ concurrency: 2, prefillTps: 20_000, timeScale: 1, ...options });
    await Promise.all(
      [1, 2].map((seed) =>
        client.chat.completions.create({ model: MODEL, messages: messages(), seed, max_tokens: 8 }),
      ),
    );
    return e.stats();
  }

  it("vllm (its default): the second request waits for the first one's prefill and evaluates one token", async () => {
    const s = await twoAtOnce({ emulate: 'vllm' });
    expect(s.cacheMisses).toBe(1);
    expect(s.cacheHits).toBe(1);
    expect(s.sharedPrefills).toBe(1);
    expect(s.prefillTokens).toBe(s.promptTokens / 2 + 1);
  });

  it('llama-server (its default): each slot evaluates the prompt itself', async () => {
    const s = await twoAtOnce({ emulate: 'llama-server' });
    expect(s.cacheMisses).toBe(2);
    expect(s.sharedPrefills).toBe(0);
    expect(s.prefillTokens).toBe(s.promptTokens);
  });

  it('can be switched on for any flavour, and off for vllm', async () => {
    expect((await twoAtOnce({ emulate: 'ollama', sharePrefill: true })).sharedPrefills).toBe(1);
    expect((await twoAtOnce({ emulate: 'vllm', sharePrefill: false })).cacheMisses).toBe(2);
  });

  it('a waiter whose prefill owner goes away evaluates the prompt itself', async () => {
    const { e, client } = await emulator({
      emulate: 'vllm',
      concurrency: 2,
      prefillTps: 2_000,
      timeScale: 1,
    });
    const gone = new AbortController();
    const first = client.chat.completions
      .create({ model: MODEL, messages: messages(), seed: 1, max_tokens: 8 }, { signal: gone.signal })
      .catch(() => null);
    const second = client.chat.completions.create({
      model: MODEL,
      messages: messages(),
      seed: 2,
      max_tokens: 8,
    });
    setTimeout(() => gone.abort(), 50);
    expect(await first).toBeNull();
    const answer = await second;
    expect(answer.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    expect(e.stats().sharedPrefills).toBe(0);
  });
});
