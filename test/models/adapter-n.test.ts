import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type Emulator, type EmulatorOptions } from '../../node/model-server/emulator.ts';
import {
  createModelAdapter,
  type GenerateRequest,
  type ModelAdapterOptions,
  type Sample,
  type SampleOutcome,
} from '../../node/models/adapter.ts';
import { probeServer } from '../../node/models/probe.ts';
import type { Task } from '../../protocol/task.ts';
import { makeFixtureTasks } from './fixtures.ts';

let fixture: Awaited<ReturnType<typeof makeFixtureTasks>>;
const open: { close: () => Promise<void> }[] = [];
const MODEL = 'vtnode-emulated-coder';

beforeAll(async () => {
  fixture = await makeFixtureTasks(2, 8000);
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
  return e;
}

async function adapterFor(e: Emulator, extra: Partial<ModelAdapterOptions> = {}) {
  const probed = await probeServer(e.url);
  return createModelAdapter({
    url: probed.url,
    behaviour: probed.behaviour,
    concurrency: probed.concurrency,
    backoffMs: 5,
    ...extra,
  });
}

function job(task: Task, k: number, extra: Partial<GenerateRequest> = {}): GenerateRequest {
  return { model: MODEL, messages: task.messages, k, sampling: { maxTokens: 2048 }, seedBase: 100, ...extra };
}

async function run(adapter: ReturnType<typeof createModelAdapter>, req: GenerateRequest) {
  const out: SampleOutcome[] = [];
  for await (const o of adapter.generate(req)) out.push(o);
  const failed = out.filter((o) => !o.ok);
  expect(failed, failed.map((f) => (f.ok ? '' : f.error.message)).join('; ')).toEqual([]);
  return (out as (Sample & { ok: true })[]).sort((a, b) => a.index - b.index);
}

/** What the same server answers to each seed alone (n = 1): the witness that choice i used seed + i. */
async function alone(e: Emulator, task: Task, seeds: number[]): Promise<string[]> {
  const client = new OpenAI({ baseURL: `${e.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const texts: string[] = [];
  for (const seed of seeds) {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: task.messages,
      seed,
      max_tokens: 2048,
    });
    texts.push(r.choices[0]!.message.content ?? '');
  }
  return texts;
}

describe('the adapter and n, against each emulated server', () => {
  it('llama-server: asks once with n = k-1, learns it is honoured, and every sample keeps its own seed', async () => {
    const e = await emulator({ emulate: 'llama-server', concurrency: 4 });
    const adapter = await adapterFor(e);
    expect(adapter.honoursN()).toBeNull();
    const task = fixture.tasks[0]!;
    const samples = await run(adapter, job(task, 4));
    expect(adapter.honoursN()).toBe(true);
    expect(e.stats().requests).toBe(2); // the warm-up, then one n = 3
    expect(e.stats().cacheMisses).toBe(1);
    expect(samples.map((s) => [s.index, s.seed, s.choice])).toEqual([
      [0, 100, 0],
      [1, 101, 0],
      [2, 102, 1],
      [3, 103, 2],
    ]);
    expect(samples.map((s) => s.text)).toEqual(await alone(e, task, [100, 101, 102, 103]));
    // llama-server answers n > 1 with one result per choice, each with its own usage: taken as is.
    const prompt = samples[0]!.usage.promptTokens;
    for (const s of samples) {
      expect(s.usage.promptTokens).toBe(prompt);
      expect(s.usage.completionTokens).toBe(Math.max(1, Math.ceil(s.text.length / 4)));
    }
    // A second job uses n without asking again.
    e.reset();
    await run(adapter, job(fixture.tasks[1]!, 5, { seedBase: 7 }));
    expect(e.stats().requests).toBe(2);
  });

  it('llama-server: n never exceeds its slots (it refuses more), so k - 1 = 5 on 2 slots takes three requests', async () => {
    const e = await emulator({ emulate: 'llama-server', concurrency: 2 });
    const adapter = await adapterFor(e);
    const samples = await run(adapter, job(fixture.tasks[0]!, 6));
    expect(samples.map((s) => s.seed)).toEqual([100, 101, 102, 103, 104, 105]);
    expect(e.stats().requests).toBe(1 + 3);
  });

  it('llama-server that refuses n (an older build, or n above its slots): one request per sample, no failure', async () => {
    const e = await emulator({ emulate: 'llama-server', concurrency: 1 });
    const adapter = await adapterFor(e, { maxN: 3 }); // more than its one slot: refused with a 400
    const samples = await run(adapter, job(fixture.tasks[0]!, 4));
    expect(adapter.honoursN()).toBe(false);
    expect(samples.map((s) => s.seed)).toEqual([100, 101, 102, 103]);
    expect(e.stats().requests).toBe(1 + 3); // the refused request never reached a slot
  });

  it('vLLM: honoured from the start, all choices in one object, completion tokens split to add up to usage', async () => {
    const e = await emulator({ emulate: 'vllm', concurrency: 8 });
    const adapter = await adapterFor(e);
    expect(adapter.honoursN()).toBe(true);
    const task = fixture.tasks[0]!;
    const samples = await run(adapter, job(task, 5));
    expect(e.stats().requests).toBe(2);
    expect(samples.map((s) => s.seed)).toEqual([100, 101, 102, 103, 104]);
    expect(samples.map((s) => s.text)).toEqual(await alone(e, task, [100, 101, 102, 103, 104]));
    const fanned = samples.slice(1);
    const total = fanned.reduce((s, x) => s + x.usage.completionTokens, 0);
    expect(total).toBe(fanned.reduce((s, x) => s + Math.max(1, Math.ceil(x.text.length / 4)), 0));
    for (const s of fanned) {
      expect(s.usage.promptTokens).toBe(samples[0]!.usage.promptTokens); // the prompt is counted once, not per choice
      expect(s.usage.cachedTokens).toBe(s.usage.promptTokens - 1);
    }
  });

  it('caller seeds that are not consecutive: one n-request per consecutive run, each seed exact', async () => {
    const e = await emulator({ emulate: 'vllm', concurrency: 8 });
    const adapter = await adapterFor(e);
    const seeds = [5, 40, 41, 42, 9, 10];
    const task = fixture.tasks[0]!;
    const samples = await run(adapter, job(task, 6, { seeds }));
    expect(e.stats().requests).toBe(3); // the warm-up (5), then [40, 41, 42] and [9, 10]
    expect(samples.map((s) => s.seed)).toEqual(seeds);
    expect(samples.map((s) => s.text)).toEqual(await alone(e, task, seeds));
  });

  for (const emulate of ['ollama', 'mlx'] as const) {
    it(`${emulate}: does not honour n, so warm-then-fan-out with one request per sample`, async () => {
      const e = await emulator({ emulate, concurrency: 2 });
      const adapter = await adapterFor(e);
      expect(adapter.honoursN()).toBe(false);
      const samples = await run(adapter, job(fixture.tasks[0]!, 4));
      expect(e.stats().requests).toBe(4);
      expect(samples.map((s) => [s.seed, s.choice])).toEqual([
        [100, 0],
        [101, 0],
        [102, 0],
        [103, 0],
      ]);
    });

    it(`${emulate} told to use n anyway: the one choice it returns counts, the rest are sent again, nothing fails`, async () => {
      const e = await emulator({ emulate, concurrency: 2 });
      const adapter = await adapterFor(e, { useN: true });
      const task = fixture.tasks[0]!;
      const samples = await run(adapter, job(task, 4));
      expect(e.stats().requests).toBe(4); // the warm-up, the ignored n = 3, then samples 2 and 3 alone
      expect(adapter.honoursN()).toBe(false);
      expect(samples.map((s) => s.seed)).toEqual([100, 101, 102, 103]);
      expect(samples.map((s) => s.text)).toEqual(await alone(e, task, [100, 101, 102, 103]));
    });
  }

  it('an n-request that fails after its retries fails its samples as retryable (re-placed, never a 0)', async () => {
    const e = await emulator({ emulate: 'vllm', concurrency: 4 });
    const adapter = await adapterFor(e, { retries: 1 });
    const task = fixture.tasks[0]!;
    const out: SampleOutcome[] = [];
    let failing = false;
    for await (const o of adapter.generate(job(task, 4))) {
      out.push(o);
      if (!failing) {
        e.setFaults({ errorRate: 1 }); // after the warm-up answered
        failing = true;
      }
    }
    const bad = out.filter((o) => !o.ok);
    expect(bad.map((o) => o.index).sort()).toEqual([1, 2, 3]);
    for (const o of bad) if (!o.ok) expect(o.retryable).toBe(true);
    expect(e.stats().faults.error).toBe(2); // one n = 3 request, tried twice: not split into more
    expect(adapter.honoursN()).toBe(true); // a server error does not unlearn n
  });
});
