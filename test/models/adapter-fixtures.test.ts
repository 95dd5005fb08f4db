import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createModelAdapter,
  type ModelAdapterOptions,
  type SampleOutcome,
} from '../../node/models/adapter.ts';
import { parseWith } from '../../protocol/parse.ts';

/**
 * Replays response bytes recorded in test/fixtures/servers/<server>/*.json (shapes taken from each
 * server's code, see docs/model-servers.md) through the real openai client: the emulator is not the
 * only witness of what the adapter reads.
 */
const Fixture = z.object({
  source: z.string().min(1),
  request: z.record(z.string(), z.unknown()),
  status: z.number().int(),
  body: z.unknown().optional(),
  sse: z.array(z.unknown()).optional(),
});
type Fixture = z.infer<typeof Fixture>;

const dir = new URL('../fixtures/servers/', import.meta.url);
const fixture = (name: string): Fixture =>
  parseWith(Fixture, JSON.parse(readFileSync(new URL(name, dir), 'utf8')), name);

const open: { close: () => Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

/** A server that answers chat requests with the given fixtures in turn, and keeps the request bodies. */
async function replay(script: (string | Omit<Fixture, 'source' | 'request'>)[]) {
  const bodies: Record<string, unknown>[] = [];
  let next = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
      const entry = script[Math.min(next++, script.length - 1)]!;
      const f = typeof entry === 'string' ? fixture(entry) : entry;
      if (f.sse) {
        res.writeHead(f.status, { 'content-type': 'text/event-stream' });
        for (const event of f.sse) res.write(`data: ${JSON.stringify(event)}\n\n`);
        res.end('data: [DONE]\n\n');
      } else {
        res.writeHead(f.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(f.body));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const handle = {
    url,
    bodies,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  open.push(handle);
  return handle;
}

async function generate(options: Omit<ModelAdapterOptions, 'url'>, url: string, k: number, maxTokens = 64) {
  const adapter = createModelAdapter({ url, backoffMs: 1, ...options });
  const out: SampleOutcome[] = [];
  for await (const o of adapter.generate({
    model: 'm',
    messages: [{ role: 'user', content: 'Write add.' }],
    k,
    sampling: { maxTokens },
    seedBase: 100,
  }))
    out.push(o);
  return { adapter, out: out.sort((a, b) => a.index - b.index) };
}

const oks = (out: SampleOutcome[]) => out.flatMap((o) => (o.ok ? [o] : []));

describe('the adapter on recorded server responses', () => {
  it('llama-server n = 3: one result per choice, each with its own usage and timings; seeds seed + i', async () => {
    const s = await replay(['llama-server/single.json', 'llama-server/n3-results.json']);
    const { adapter, out } = await generate({ behaviour: 'llama-server', concurrency: 4 }, s.url, 4, 16);
    const samples = oks(out);
    expect(samples.map((x) => [x.index, x.seed, x.choice, x.finishReason])).toEqual([
      [0, 100, 0, 'stop'],
      [1, 101, 0, 'stop'],
      [2, 102, 1, 'stop'],
      [3, 103, 2, 'length'],
    ]);
    expect(samples.map((x) => x.usage)).toEqual([
      { promptTokens: 2051, completionTokens: 22, cachedTokens: 2050 },
      { promptTokens: 2051, completionTokens: 22, cachedTokens: 2050 },
      { promptTokens: 2051, completionTokens: 26, cachedTokens: 2051 },
      { promptTokens: 2051, completionTokens: 16, cachedTokens: 2051 },
    ]);
    expect(samples[3]!.truncated).toBe(true);
    expect(samples[2]!.extract).toMatchObject({ ok: true });
    expect(samples[1]!.warm).toEqual({ warm: 'warm', source: 'cached_tokens' });
    expect(adapter.honoursN()).toBe(true);
    expect(s.bodies.map((b) => [b['n'], b['seed'], b['stream']])).toEqual([
      [undefined, 100, false],
      [3, 101, false],
    ]);
  });

  it('llama-server before n (500 "Only one completion choice is allowed"): asked with one attempt, then one request per sample', async () => {
    const s = await replay([
      'llama-server/single.json',
      'llama-server/n-refused-old.json',
      'llama-server/single.json',
    ]);
    const { adapter, out } = await generate({ behaviour: 'llama-server', concurrency: 4 }, s.url, 4);
    expect(out.every((o) => o.ok)).toBe(true);
    expect(oks(out).map((x) => x.seed)).toEqual([100, 101, 102, 103]);
    expect(s.bodies.map((b) => b['n'])).toEqual([undefined, 3, undefined, undefined, undefined]);
    // A 500 might be a hiccup: the next job asks again, and a second 500 settles it.
    expect(adapter.honoursN()).toBeNull();
    const one = 'llama-server/single.json';
    const old = 'llama-server/n-refused-old.json';
    const again = await replay([one, old, one, one, one, one, old, one]);
    const second = createModelAdapter({
      url: again.url,
      behaviour: 'llama-server',
      concurrency: 4,
      backoffMs: 1,
    });
    const job = async () => {
      const got: SampleOutcome[] = [];
      for await (const o of second.generate({
        model: 'm',
        messages: [{ role: 'user', content: 'Write add.' }],
        k: 4,
        sampling: { maxTokens: 64 },
        seedBase: 100,
      }))
        got.push(o);
      expect(got.every((o) => o.ok)).toBe(true);
    };
    await job();
    expect(second.honoursN()).toBeNull();
    await job();
    expect(second.honoursN()).toBe(false);
    expect(again.bodies.filter((b) => b['n'] !== undefined)).toHaveLength(2);
  });

  it('llama-server known to honour n, refusing n above its slots (400): one request per sample, nothing lost', async () => {
    const s = await replay([
      'llama-server/single.json',
      'llama-server/n-above-slots.json',
      'llama-server/single.json',
    ]);
    const { adapter, out } = await generate(
      { behaviour: 'llama-server', concurrency: 4, useN: true },
      s.url,
      4,
    );
    expect(oks(out).map((x) => x.seed)).toEqual([100, 101, 102, 103]);
    expect(adapter.honoursN()).toBe(false);
    expect(s.bodies).toHaveLength(5);
  });

  it('vLLM n = 3: choices in one object; completion tokens split to add up (a truncated choice has max_tokens)', async () => {
    const s = await replay(['vllm/single.json', 'vllm/n3.json']);
    const { out } = await generate({ behaviour: 'vllm', concurrency: 16 }, s.url, 4, 16);
    const samples = oks(out);
    expect(samples.map((x) => [x.seed, x.choice, x.truncated])).toEqual([
      [100, 0, false],
      [101, 0, false],
      [102, 1, true],
      [103, 2, false],
    ]);
    const fanned = samples.slice(1).map((x) => x.usage);
    expect(fanned.reduce((t, u) => t + u.completionTokens, 0)).toBe(64);
    expect(fanned[1]!.completionTokens).toBe(16);
    expect(fanned.map((u) => [u.promptTokens, u.cachedTokens])).toEqual([
      [2051, 2048],
      [2051, 2048],
      [2051, 2048],
    ]);
    expect(s.bodies[1]).toMatchObject({ n: 3, seed: 101 });
  });

  it('Ollama streams (no cached count in /v1 usage) and, told to use n, gets one choice: the rest are sent alone', async () => {
    const s = await replay(['ollama/stream.json', 'ollama/n-ignored.json', 'ollama/stream.json']);
    const { adapter, out } = await generate({ behaviour: 'ollama', concurrency: 1, useN: true }, s.url, 4);
    const samples = oks(out);
    expect(samples.map((x) => x.seed)).toEqual([100, 101, 102, 103]);
    expect(samples.map((x) => x.usage.cachedTokens)).toEqual([null, null, null, null]);
    expect(samples[0]!.ttftMs).not.toBeNull();
    expect(adapter.honoursN()).toBe(false);
    expect(s.bodies.map((b) => [b['n'], b['stream']])).toEqual([
      [undefined, true],
      [3, false],
      [undefined, true],
      [undefined, true],
    ]);
  });

  it('Ollama and mlx_lm.server by default: one request per sample, never n', async () => {
    for (const [behaviour, name] of [
      ['ollama', 'ollama/stream.json'],
      ['mlx', 'mlx/n-ignored.json'],
    ] as const) {
      const s = await replay([name]);
      const { out } = await generate({ behaviour, concurrency: 2 }, s.url, 3);
      expect(oks(out).map((x) => x.seed)).toEqual([100, 101, 102]);
      expect(s.bodies.every((b) => b['n'] === undefined)).toBe(true);
    }
  });

  it('mlx_lm.server told to use n: one choice, then the rest alone; cached_tokens read', async () => {
    const s = await replay(['mlx/n-ignored.json']);
    const { adapter, out } = await generate({ behaviour: 'mlx', concurrency: 1, useN: true }, s.url, 4);
    expect(oks(out).map((x) => [x.seed, x.usage.cachedTokens])).toEqual([
      [100, 2050],
      [101, 2050],
      [102, 2050],
      [103, 2050],
    ]);
    expect(adapter.honoursN()).toBe(false);
    expect(s.bodies).toHaveLength(4);
  });

  it('errors as each server words them: not retryable, named, one attempt', async () => {
    for (const [behaviour, name, words] of [
      ['vllm', 'vllm/model-not-found.json', 'does not exist'],
      ['ollama', 'ollama/model-not-found.json', 'try pulling it first'],
      ['mlx', 'mlx/generation-error.json', 'No model named nope'],
    ] as const) {
      const s = await replay([name]);
      const { out } = await generate({ behaviour, concurrency: 1 }, s.url, 2);
      expect(out).toHaveLength(2);
      const first = out[0]!;
      expect(first.ok).toBe(false);
      if (first.ok) continue;
      expect(first.error.message).toContain('HTTP 404');
      expect(first.error.message).toContain(words);
      expect(first.retryable).toBe(false);
      expect(first.attempts).toBe(1);
      expect(s.bodies).toHaveLength(1); // the second sample is not sent after the first failed
    }
  });

  describe('variants no server is known to send, handled all the same', () => {
    const whole = fixture('vllm/n3.json').body as {
      choices: { index: number; finish_reason: string }[];
      usage: Record<string, unknown>;
    };
    const withChoices = (choices: typeof whole.choices) => ({ status: 200, body: { ...whole, choices } });

    it('choices out of order are matched by their index', async () => {
      const s = await replay(['vllm/single.json', withChoices([...whole.choices].reverse())]);
      const { out } = await generate({ behaviour: 'vllm', concurrency: 4 }, s.url, 4, 16);
      expect(oks(out).map((x) => [x.seed, x.choice, x.truncated])).toEqual([
        [100, 0, false],
        [101, 0, false],
        [102, 1, true],
        [103, 2, false],
      ]);
    });

    it('n choices that all say index 0: one counts, the others are sent again, and n is not used again', async () => {
      const s = await replay([
        'vllm/single.json',
        withChoices(whole.choices.map((c) => ({ ...c, index: 0 }))),
        'vllm/single.json',
      ]);
      const { adapter, out } = await generate({ behaviour: 'vllm', concurrency: 4 }, s.url, 4, 16);
      expect(oks(out).map((x) => x.seed)).toEqual([100, 101, 102, 103]);
      expect(adapter.honoursN()).toBe(false);
      expect(s.bodies.map((b) => b['n'])).toEqual([undefined, 3, undefined, undefined]);
    });

    it('a choice index beyond n is dropped, not mapped onto another sample', async () => {
      const s = await replay([
        'vllm/single.json',
        withChoices(whole.choices.map((c, i) => ({ ...c, index: i === 2 ? 7 : i }))),
        'vllm/single.json',
      ]);
      const { out } = await generate({ behaviour: 'vllm', concurrency: 4 }, s.url, 4, 16);
      expect(oks(out).map((x) => [x.index, x.seed])).toEqual([
        [0, 100],
        [1, 101],
        [2, 102],
        [3, 103],
      ]);
      expect(s.bodies).toHaveLength(3);
    });

    it('an array answer with a bad part names the part and the field', async () => {
      const parts = fixture('llama-server/n3-results.json').body as Record<string, unknown>[];
      const broken = parts.map((p, i) => (i === 1 ? { ...p, usage: { prompt_tokens: 'many' } } : p));
      const s = await replay(['llama-server/single.json', { status: 200, body: broken }]);
      const { out } = await generate({ behaviour: 'llama-server', concurrency: 4, useN: true }, s.url, 4);
      const bad = out.filter((o) => !o.ok);
      expect(bad.map((o) => o.index)).toEqual([1, 2, 3]);
      for (const o of bad) if (!o.ok) expect(o.error.message).toMatch(/1\.usage\.prompt_tokens/);
    });
  });

  it('every fixture names where its shape comes from and parses', () => {
    for (const name of [
      'llama-server/single.json',
      'llama-server/n3-results.json',
      'llama-server/n-above-slots.json',
      'llama-server/n-refused-old.json',
      'vllm/single.json',
      'vllm/n3.json',
      'vllm/model-not-found.json',
      'ollama/n-ignored.json',
      'ollama/stream.json',
      'ollama/model-not-found.json',
      'mlx/n-ignored.json',
      'mlx/generation-error.json',
    ])
      expect(fixture(name).source.length).toBeGreaterThan(20);
  });
});
