import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type Emulator, type EmulatorOptions } from '../../node/model-server/emulator.ts';
import { extractCodeBlock } from '../../protocol/extract.ts';
import { makeFixtureTasks, referenceSource } from './fixtures.ts';

let fixture: Awaited<ReturnType<typeof makeFixtureTasks>>;
const open: Emulator[] = [];
const MODEL = 'vtnode-emulated-coder';

beforeAll(async () => {
  fixture = await makeFixtureTasks(3, 2000);
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((e) => e.close()));
});

async function start(options: Partial<EmulatorOptions> & Pick<EmulatorOptions, 'emulate'>) {
  const e = await createEmulator({ tasks: fixture.tasks, timeScale: 0, ...options });
  open.push(e);
  return { e, client: new OpenAI({ baseURL: `${e.url}/v1`, apiKey: 'x', maxRetries: 0 }) };
}

describe('emulator', () => {
  it('keeps an LRU of C prompts: the least recently used is evicted and misses again', async () => {
    const { e, client } = await start({ emulate: 'mlx', cachePrompts: 2 });
    const ask = (i: number) =>
      client.chat.completions.create({ model: MODEL, messages: fixture.tasks[i]!.messages, seed: 1 });
    await ask(0);
    await ask(1);
    await ask(0); // hit, 0 becomes most recent
    await ask(2); // evicts 1
    await ask(0); // hit
    const r = await ask(1); // miss
    expect(r.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    expect(e.stats()).toMatchObject({ cacheHits: 2, cacheMisses: 4 });
  });

  it('reports llama-server timings: prefill proportional to uncached tokens, decode to output tokens', async () => {
    const { client } = await start({
      emulate: 'llama-server',
      prefillTps: 1000,
      decodeTps: 100,
      timeScale: 0.01,
      script: 'reference',
    });
    const body = { model: MODEL, messages: fixture.tasks[0]!.messages, seed: 3 };
    type Timed = {
      timings: {
        prompt_n: number;
        cache_n: number;
        prompt_ms: number;
        predicted_n: number;
        predicted_ms: number;
      };
    };
    const cold = (await client.chat.completions.create(body)) as unknown as Timed;
    const warm = (await client.chat.completions.create(body)) as unknown as Timed;
    expect(cold.timings.cache_n).toBe(0);
    expect(cold.timings.prompt_ms).toBeCloseTo((cold.timings.prompt_n / 1000) * 1000 * 0.01, 6);
    expect(warm.timings.prompt_n).toBe(1);
    expect(warm.timings.cache_n).toBe(cold.timings.prompt_n - 1);
    expect(warm.timings.predicted_ms).toBeCloseTo((warm.timings.predicted_n / 100) * 1000 * 0.01, 6);
  });

  it('never runs more requests at once than its concurrency', async () => {
    const { e, client } = await start({
      emulate: 'llama-server',
      concurrency: 2,
      decodeTps: 2000,
      timeScale: 1,
    });
    await Promise.all(
      [0, 1, 2, 3, 4].map((seed) =>
        client.chat.completions.create({ model: MODEL, messages: fixture.tasks[0]!.messages, seed }),
      ),
    );
    expect(e.stats().maxRunning).toBe(2);
    expect(e.stats().completed).toBe(5);
  });

  it('is deterministic per (prompt, seed) in mixed mode and varies across seeds', async () => {
    const { client } = await start({ emulate: 'llama-server', script: 'mixed' });
    const texts = async () => {
      const out: string[] = [];
      for (let seed = 0; seed < 12; seed++) {
        const r = await client.chat.completions.create({
          model: MODEL,
          messages: fixture.tasks[1]!.messages,
          seed,
          max_tokens: 300,
        });
        out.push(`${r.choices[0]!.finish_reason}:${r.choices[0]!.message.content}`);
      }
      return out;
    };
    const a = await texts();
    expect(await texts()).toEqual(a);
    expect(new Set(a).size).toBeGreaterThan(3);
    const kinds = a.map((t) =>
      t.startsWith('length:') ? 'truncated' : extractCodeBlock(t.slice(5)).ok ? 'block' : 'flagged',
    );
    expect(kinds).toContain('block');
    expect(a.some((t) => t.endsWith(`\`\`\`ts\n${referenceSource(1)}\`\`\`\n`))).toBe(true);
  });

  it('answers n choices in one request (vllm; llama-server and the ones that ignore n: emulator-n.test.ts)', async () => {
    const { e, client } = await start({ emulate: 'vllm', script: 'mutants' });
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: fixture.tasks[0]!.messages,
      n: 3,
      seed: 9,
    });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(e.stats().requests).toBe(1);
  });

  it('answers an unknown prompt with a marker, and a task whose reference is gone with garbage', async () => {
    const tmp = await makeFixtureTasks(1, 100);
    await rm(join(tmp.dir, tmp.tasks[0]!.target));
    const { e, client } = await start({ emulate: 'mlx', tasks: tmp.tasks, script: 'reference' });
    const unknown = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hello' }],
    });
    expect(unknown.choices[0]!.message.content).toContain('no task in --tasks matches this prompt');
    await client.chat.completions.create({ model: MODEL, messages: tmp.tasks[0]!.messages });
    expect(e.stats().candidates).toMatchObject({ 'unknown-prompt': 1, garbage: 1, reference: 0 });
    await tmp.cleanup();
  });

  it('refuses bad requests with 400 naming the field, and unknown models with 404', async () => {
    const { e } = await start({ emulate: 'llama-server' });
    const post = (body: string) => fetch(`${e.url}/v1/chat/completions`, { method: 'POST', body });
    const r1 = await post('{"model": "x", "messages": [');
    expect(r1.status).toBe(400);
    expect(await r1.text()).toContain('not JSON');
    const r2 = await post(JSON.stringify({ model: MODEL, messages: [{ role: 'robot', content: 'x' }] }));
    expect(r2.status).toBe(400);
    expect(await r2.text()).toContain('messages.0.role');
    const r3 = await post(JSON.stringify({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] }));
    expect(r3.status).toBe(404);
    expect(e.stats().requests).toBe(0);
  });

  it('slows down requests by the slow factor when told to', async () => {
    const { e, client } = await start({
      emulate: 'mlx',
      decodeTps: 1000,
      timeScale: 1,
      faults: { slowRate: 1, slowFactor: 20 },
    });
    const t0 = performance.now();
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hello' }],
    });
    const expectedMs =
      ((r.usage!.completion_tokens / 1000) * 1000 + (r.usage!.prompt_tokens / 1500) * 1000) * 20;
    expect(performance.now() - t0).toBeGreaterThanOrEqual(expectedMs * 0.9);
    expect(e.stats().faults.slow).toBe(1);
  });

  it('answers garbage (HTTP 200, no chat completion) when told to, while its probes still answer', async () => {
    const { e } = await start({ emulate: 'llama-server', faults: { garbageRate: 1 } });
    const chat = await fetch(`${e.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }] }),
    });
    expect(chat.status).toBe(200);
    const text = await chat.text();
    expect(() => JSON.parse(text)).toThrow();
    expect(e.stats().faults.garbage).toBe(1);
    const models = await fetch(`${e.url}/v1/models`);
    expect(models.status).toBe(200);
    expect(((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toContain(MODEL);
  });

  it('speaks Ollama native /api/chat with prompt-eval timings (no cached count), streamed or not', async () => {
    const { e } = await start({
      emulate: 'ollama',
      prefillTps: 2000,
      timeScale: 1,
      decodeTps: 50_000,
      script: 'reference',
    });
    const chat = (stream: boolean) =>
      fetch(`${e.url}/api/chat`, {
        method: 'POST',
        body: JSON.stringify({
          model: MODEL,
          messages: fixture.tasks[2]!.messages,
          stream,
          options: { seed: 4 },
        }),
      });
    const cold = (await (await chat(false)).json()) as Record<string, number | boolean | string>;
    expect(cold).toMatchObject({ done: true, done_reason: 'stop' });
    expect(cold['prompt_eval_count']).toBeGreaterThan(500);
    expect(cold['prompt_eval_duration']).toBeGreaterThan(200e6); // ns: > 500 tokens at 2000/s
    expect(cold).not.toHaveProperty('prompt_eval_cached_count');
    const res = await chat(true);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    const lines = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const last = lines.at(-1)!;
    expect(last['done']).toBe(true);
    expect(last['prompt_eval_count']).toBe(cold['prompt_eval_count']);
    expect(last['prompt_eval_duration'] as number).toBeLessThan(10e6); // warm: one token evaluated
    const text = lines.map((l) => (l['message'] as { content: string }).content).join('');
    expect(extractCodeBlock(text)).toEqual({ ok: true, code: referenceSource(2), lang: 'ts' });
    const bad = await fetch(`${e.url}/api/chat`, { method: 'POST', body: '{}' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain('model');
  });
});
