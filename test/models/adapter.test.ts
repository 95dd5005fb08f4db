import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type Emulator, type EmulatorOptions } from '../../node/model-server/emulator.ts';
import {
  createModelAdapter,
  type GenerateRequest,
  type ModelAdapterOptions,
  type SampleOutcome,
} from '../../node/models/adapter.ts';
import { AbortedError, QueueFullError } from '../../node/models/errors.ts';
import { probeServer } from '../../node/models/probe.ts';
import { createWarmSet } from '../../node/models/warm.ts';
import type { Task } from '../../protocol/task.ts';
import { fakeServer, json, makeFixtureTasks, referenceSource } from './fixtures.ts';

let fixture: Awaited<ReturnType<typeof makeFixtureTasks>>;
const open: { close: () => Promise<void> }[] = [];
const MODEL = 'vtnode-emulated-coder';

beforeAll(async () => {
  fixture = await makeFixtureTasks(2, 8000); // ~2000-token prompts
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function emulator(
  options: Partial<EmulatorOptions> & Pick<EmulatorOptions, 'emulate'>,
): Promise<Emulator> {
  const e = await createEmulator({ tasks: fixture.tasks, timeScale: 0, ...options });
  open.push(e);
  return e;
}

async function adapterFor(e: Emulator, extra: Partial<ModelAdapterOptions> = {}) {
  const probed = await probeServer(e.url);
  return createModelAdapter({
    url: probed.url,
    behaviour: probed.behaviour,
    concurrency: probed.concurrency,
    backoffMs: 10,
    ...extra,
  });
}

function job(task: Task, k: number, extra: Partial<GenerateRequest> = {}): GenerateRequest {
  return {
    model: MODEL,
    messages: task.messages,
    k,
    sampling: { temperature: 0.7, maxTokens: 2048 },
    seedBase: 100,
    ...extra,
  };
}

async function collect(it: AsyncIterable<SampleOutcome>): Promise<SampleOutcome[]> {
  const out: SampleOutcome[] = [];
  for await (const o of it) out.push(o);
  return out;
}

function ok(outcomes: SampleOutcome[]) {
  return outcomes.flatMap((o) => (o.ok ? [o] : []));
}

describe('model adapter against the emulator', () => {
  it('warms with one request, then fans out: only the first pays the prefill, cached_tokens show it (llama-server)', async () => {
    const e = await emulator({
      emulate: 'llama-server',
      concurrency: 4,
      prefillTps: 20_000,
      decodeTps: 5_000,
      timeScale: 1,
      script: 'reference',
    });
    const warm = createWarmSet();
    const adapter = await adapterFor(e, { warm, useN: false });
    const task = fixture.tasks[0]!;
    const outcomes = await collect(adapter.generate(job(task, 4)));
    const samples = ok(outcomes).sort((a, b) => a.index - b.index);
    expect(samples.map((s) => s.index)).toEqual([0, 1, 2, 3]);
    expect(outcomes[0]!.index).toBe(0); // the warming request is reported first
    const stats = e.stats();
    const promptTokens = samples[0]!.usage.promptTokens;
    expect(stats.cacheMisses).toBe(1);
    expect(stats.cacheHits).toBe(3);
    expect(stats.prefillTokens).toBe(promptTokens + 3); // full prompt once, then one token each
    expect(stats.maxRunning).toBeGreaterThan(1); // the fan-out ran concurrently
    expect(samples[0]!.usage.cachedTokens).toBe(0);
    expect(samples[0]!.warm).toEqual({ warm: 'cold', source: 'cached_tokens' });
    for (const s of samples.slice(1)) {
      expect(s.usage.cachedTokens).toBe(promptTokens - 1);
      expect(s.warm).toEqual({ warm: 'warm', source: 'cached_tokens' });
    }
    expect(samples.map((s) => s.seed)).toEqual([100, 101, 102, 103]);
    for (const s of samples) {
      expect(s.extract).toEqual({ ok: true, code: referenceSource(0), lang: 'ts' });
      expect(s.truncated).toBe(false);
      expect(s.finishReason).toBe('stop');
      expect(s.tokensPerSecond).toBeGreaterThan(0);
      expect(s.latencyMs).toBeGreaterThan(0);
    }
    expect(warm.entries()).toEqual([{ prompt: task.promptFingerprint, model: MODEL }]);

    // Contrast: k simultaneous first requests straight through the openai client each pay a full prefill.
    e.reset();
    const client = new OpenAI({ baseURL: `${e.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const other = fixture.tasks[1]!;
    await Promise.all(
      [0, 1, 2, 3].map((seed) =>
        client.chat.completions.create({ model: MODEL, messages: other.messages, seed }),
      ),
    );
    expect(e.stats().cacheMisses).toBe(4);
  });

  it('observes warmth on Ollama from the prefill rate of streamed answers (no cached_tokens in /v1 usage)', async () => {
    const e = await emulator({
      emulate: 'ollama',
      prefillTps: 2_500,
      decodeTps: 20_000,
      timeScale: 1,
      script: 'reference',
    });
    const warm = createWarmSet();
    const adapter = await adapterFor(e, { warm });
    const task = fixture.tasks[0]!;
    const samples = ok(await collect(adapter.generate(job(task, 3)))).sort((a, b) => a.index - b.index);
    expect(samples).toHaveLength(3);
    expect(samples.every((s) => s.usage.cachedTokens === null && s.ttftMs !== null)).toBe(true);
    expect(samples[0]!.warm).toEqual({ warm: 'unknown', source: 'ttft' }); // no baseline yet
    expect(samples[0]!.ttftMs!).toBeGreaterThan(600); // ~2000 tokens at 2.5k/s: a warm one must come 4x faster
    const ttfts = samples.map((s) => Math.round(s.ttftMs!)).join(', ');
    for (const s of samples.slice(1))
      expect(s.warm, `ttft ms: ${ttfts}`).toEqual({ warm: 'warm', source: 'ttft' });
    expect(warm.has(task.promptFingerprint, MODEL)).toBe(true);
    // A new prompt is now recognised as cold against the baseline.
    const cold = ok(await collect(adapter.generate(job(fixture.tasks[1]!, 1))));
    expect(cold[0]!.warm).toEqual({ warm: 'cold', source: 'ttft' });
    expect(e.stats().cacheMisses).toBe(2);
  });

  it('reads cached_tokens from mlx_lm.server-style usage, and evictions from the LRU show as cold', async () => {
    const e = await emulator({ emulate: 'mlx', cachePrompts: 1, script: 'reference' });
    const warm = createWarmSet();
    const adapter = await adapterFor(e, { warm });
    const [a, b] = fixture.tasks as [Task, Task];
    await collect(adapter.generate(job(a, 2)));
    expect(warm.entries().map((w) => w.prompt)).toEqual([a.promptFingerprint]);
    await collect(adapter.generate(job(b, 2))); // evicts a, which nobody has observed yet
    expect(warm.entries().map((w) => w.prompt)).toEqual([b.promptFingerprint, a.promptFingerprint]);
    const again = ok(await collect(adapter.generate(job(a, 1))));
    expect(again[0]!.warm).toEqual({ warm: 'cold', source: 'cached_tokens' });
    expect(warm.entries().map((w) => w.prompt)).toEqual([b.promptFingerprint]);
  });

  it('flags truncated answers (finish_reason length) and their unclosed code block', async () => {
    const e = await emulator({ emulate: 'llama-server', script: 'truncate' });
    const adapter = await adapterFor(e);
    const samples = ok(
      await collect(adapter.generate(job(fixture.tasks[0]!, 2, { sampling: { maxTokens: 64 } }))),
    );
    expect(samples).toHaveLength(2);
    for (const s of samples) {
      expect(s.finishReason).toBe('length');
      expect(s.truncated).toBe(true);
      expect(s.usage.completionTokens).toBe(64);
      expect(s.extract).toMatchObject({ ok: false, flag: 'unclosed-code-block' });
    }
    expect(e.stats().truncated).toBe(2);
  });

  it('answers mutants and garbage as scripted, deterministically per (prompt, seed)', async () => {
    const e = await emulator({ emulate: 'llama-server', script: 'mutants', concurrency: 2 });
    const adapter = await adapterFor(e);
    const task = fixture.tasks[1]!;
    const first = ok(await collect(adapter.generate(job(task, 4)))).sort((a, b) => a.index - b.index);
    const second = ok(await collect(adapter.generate(job(task, 4)))).sort((a, b) => a.index - b.index);
    expect(first.map((s) => s.text)).toEqual(second.map((s) => s.text));
    for (const s of first) {
      expect(s.extract.ok).toBe(true);
      if (s.extract.ok) expect(s.extract.code).not.toBe(referenceSource(1));
    }
    const other = ok(await collect(adapter.generate(job(task, 4, { seedBase: 7 }))));
    expect(other.map((s) => s.text).sort()).not.toEqual(first.map((s) => s.text).sort());

    const g = await emulator({ emulate: 'mlx', script: 'garbage' });
    const ga = await adapterFor(g);
    const garbage = ok(await collect(ga.generate(job(task, 6))));
    expect(garbage.every((s) => !s.extract.ok || s.extract.code.includes('export const = ((;'))).toBe(true);
  });

  it('uses n=k-1 for the fan-out when enabled: two requests in all', async () => {
    const e = await emulator({ emulate: 'llama-server', script: 'mixed', concurrency: 4 });
    const adapter = await adapterFor(e, { useN: true });
    const samples = ok(await collect(adapter.generate(job(fixture.tasks[0]!, 4))));
    expect(samples.map((s) => s.index).sort()).toEqual([0, 1, 2, 3]);
    expect(e.stats().requests).toBe(2);
    expect(samples.filter((s) => s.index > 0).map((s) => s.choice)).toEqual([0, 1, 2]);
  });

  it('retries 500s with backoff, then reports the failure without hammering the server', async () => {
    const e = await emulator({ emulate: 'llama-server', faults: { errorRate: 1 } });
    const adapter = await adapterFor(e, { retries: 2 });
    const outcomes = await collect(adapter.generate(job(fixture.tasks[0]!, 3)));
    expect(outcomes).toHaveLength(3);
    expect(outcomes.every((o) => !o.ok && o.retryable)).toBe(true);
    const first = outcomes.find((o) => o.index === 0)!;
    expect(first.ok).toBe(false);
    if (!first.ok) {
      expect(first.attempts).toBe(3);
      expect(first.error.message).toContain(e.url);
      expect(first.error.message).toContain('HTTP 500');
    }
    expect(e.stats().faults.error).toBe(3); // 1 + 2 retries, the other samples skipped
    expect(adapter.load()).toEqual({ queued: 0, running: 0, capacity: 1 });

    // Intermittent 500s are absorbed by the retries.
    e.setFaults({ errorRate: 0.5, seed: 3 });
    const patient = await adapterFor(e, { retries: 8 });
    const mixed = await collect(patient.generate(job(fixture.tasks[0]!, 4)));
    expect(mixed.every((o) => o.ok)).toBe(true);
    expect(mixed.some((o) => o.attempts > 1)).toBe(true);
  });

  it('times out on a hanging server within its bound, and the caller can abort', async () => {
    const e = await emulator({ emulate: 'ollama', faults: { hangRate: 1 } });
    const adapter = await adapterFor(e, { requestTimeoutMs: 200, retries: 1 });
    const started = Date.now();
    const outcomes = await collect(adapter.generate(job(fixture.tasks[0]!, 2)));
    expect(Date.now() - started).toBeLessThan(5000);
    expect(outcomes.every((o) => !o.ok)).toBe(true);
    const first = outcomes.find((o) => o.index === 0)!;
    if (!first.ok) expect(first.error.message).toMatch(/no complete answer within 200 ms/);
    expect(e.stats().faults.hang).toBe(2);

    const slowAdapter = await adapterFor(e, { requestTimeoutMs: 60_000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 150);
    const t0 = Date.now();
    await expect(
      collect(slowAdapter.generate(job(fixture.tasks[0]!, 2, { signal: ac.signal }))),
    ).rejects.toBeInstanceOf(AbortedError);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(slowAdapter.load().queued).toBe(0);
  });

  it('times out a streamed answer that stalls after its headers (the timeout covers the whole body)', async () => {
    const e = await emulator({
      emulate: 'ollama',
      timeScale: 1,
      decodeTps: 50,
      faults: { slowRate: 1, slowFactor: 100 },
    });
    const adapter = await adapterFor(e, { requestTimeoutMs: 300, retries: 0 });
    const t0 = Date.now();
    const [o] = await collect(adapter.generate(job(fixture.tasks[0]!, 1)));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(o!.ok).toBe(false);
    if (!o!.ok) {
      expect(o!.retryable).toBe(true);
      expect(o!.error.message).toMatch(/no complete answer within 300 ms/);
    }
  });

  it('reports dropped connections as retryable connection failures', async () => {
    const e = await emulator({ emulate: 'mlx', faults: { dropRate: 1 } });
    const adapter = await adapterFor(e, { retries: 1 });
    const outcomes = await collect(adapter.generate(job(fixture.tasks[0]!, 2)));
    const first = outcomes.find((o) => o.index === 0)!;
    expect(first.ok).toBe(false);
    if (!first.ok) {
      expect(first.retryable).toBe(true);
      expect(first.error.message).toContain(e.url);
      expect(first.error.message).toMatch(/connection failed/);
    }
    expect(e.stats().faults.drop).toBe(2);
  });

  it('rejects a job when the bounded queue is full, with a clear error, and accepts again once drained', async () => {
    const e = await emulator({ emulate: 'llama-server', prefillTps: 20_000, decodeTps: 2_000, timeScale: 1 });
    // Concurrency 1: each job holds one request in flight at a time, so it takes one place in the queue.
    const adapter = await adapterFor(e, { maxQueued: 2 });
    const first = collect(adapter.generate(job(fixture.tasks[0]!, 3)));
    const second = collect(adapter.generate(job(fixture.tasks[1]!, 2)));
    expect(adapter.load().queued + adapter.load().running).toBe(2);
    let err: unknown;
    try {
      adapter.generate(job(fixture.tasks[0]!, 2));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(QueueFullError);
    expect((err as Error).message).toMatch(
      /queue full: 2 requests queued or running, limit 2, this job needs 1 more/,
    );
    expect((err as Error).message).toContain(e.url);
    expect((await first).every((o) => o.ok)).toBe(true);
    expect((await second).every((o) => o.ok)).toBe(true);
    expect(adapter.load()).toEqual({ queued: 0, running: 0, capacity: 1 });
    expect((await collect(adapter.generate(job(fixture.tasks[0]!, 2)))).every((o) => o.ok)).toBe(true);
  });

  it('admits a job of more samples than the queue holds (k = 10, a queue of 4): it has one request in flight at a time', async () => {
    const e = await emulator({ emulate: 'llama-server', prefillTps: 20_000, decodeTps: 2_000, timeScale: 1 });
    const adapter = await adapterFor(e, { maxQueued: 4 });
    const outcomes = await collect(adapter.generate(job(fixture.tasks[0]!, 10)));
    expect(outcomes).toHaveLength(10);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(adapter.load()).toEqual({ queued: 0, running: 0, capacity: 1 });
  });

  it('reports an unknown model as a non-retryable failure after one attempt', async () => {
    const e = await emulator({ emulate: 'llama-server' });
    const adapter = await adapterFor(e);
    const outcomes = await collect(adapter.generate(job(fixture.tasks[0]!, 2, { model: 'no-such-model' })));
    const first = outcomes.find((o) => o.index === 0)!;
    expect(first.ok).toBe(false);
    if (!first.ok) {
      expect(first.retryable).toBe(false);
      expect(first.attempts).toBe(1);
      expect(first.error.message).toMatch(/HTTP 404/);
    }
  });

  it('names the URL and the field when a server answers with bad fields or bad JSON', async () => {
    const badField = await fakeServer({
      'POST /v1/chat/completions': (_q, r) =>
        json(r, {
          choices: [{ index: 0, message: { content: 5 }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1 },
        }),
    });
    const badJson = await fakeServer({ 'POST /v1/chat/completions': (_q, r) => json(r, '{"choices": [') });
    const noUsage = await fakeServer({
      'POST /v1/chat/completions': (_q, r) =>
        json(r, { choices: [{ index: 0, message: { content: 'x' }, finish_reason: 'stop' }] }),
    });
    open.push(badField, badJson, noUsage);
    const run = async (url: string) => {
      const adapter = createModelAdapter({ url, behaviour: 'llama-server', concurrency: 1, backoffMs: 5 });
      const [o] = await collect(adapter.generate(job(fixture.tasks[0]!, 1)));
      expect(o!.ok).toBe(false);
      return o as Extract<SampleOutcome, { ok: false }>;
    };
    const f1 = await run(badField.url);
    expect(f1.error.message).toContain(badField.url);
    expect(f1.error.message).toContain('choices.0.message.content');
    const f2 = await run(badJson.url);
    expect(f2.error.message).toContain(badJson.url);
    const f3 = await run(noUsage.url);
    expect(f3.error.message).toContain(`${noUsage.url}: POST /v1/chat/completions: bad response: usage`);
  });

  it('fails a sample whose single-choice answer lacks choice 0, instead of sending it again without end', async () => {
    // A misbehaving server (or proxy) that numbers the one choice of an n = 1 answer 1: the choice is out
    // of range, so the sample is missing. Sent again singly, it would come back the same way, for ever;
    // this one gives up after 5 such answers, so the test fails rather than hangs on that behaviour.
    let requests = 0;
    const renumbering = await fakeServer({
      'POST /v1/chat/completions': (_q, r) =>
        json(r, {
          choices: [{ index: ++requests <= 5 ? 1 : 0, message: { content: 'x' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1 },
        }),
    });
    open.push(renumbering);
    const adapter = createModelAdapter({ url: renumbering.url, behaviour: 'vllm', concurrency: 1 });
    const outcomes = await collect(adapter.generate(job(fixture.tasks[0]!, 2)));
    expect(requests).toBe(1); // the first request, failed; the second sample is not sent after it
    expect(outcomes).toHaveLength(2);
    const [first, second] = outcomes.sort((a, b) => a.index - b.index);
    expect(first!.ok).toBe(false);
    if (!first!.ok) {
      expect(first!.error.message).toContain(
        `${renumbering.url}: POST /v1/chat/completions: bad response: choices: no choice 0 (got index 1)`,
      );
      expect(first!.attempts).toBe(1);
    }
    expect(second!.ok).toBe(false);
    if (!second!.ok) expect(second!.error.message).toMatch(/skipped: the job's first request failed/);
    expect(adapter.load()).toEqual({ queued: 0, running: 0, capacity: 1 });
  });

  it('rejects bad requests before sending anything', () => {
    const adapter = createModelAdapter({ url: 'http://127.0.0.1:9', behaviour: 'openai', concurrency: 1 });
    expect(() => adapter.generate(job(fixture.tasks[0]!, 0))).toThrow(/k must be a positive integer/);
    expect(() => adapter.generate(job(fixture.tasks[0]!, 2, { seeds: [1] }))).toThrow(/seeds has 1 entries/);
  });
});
