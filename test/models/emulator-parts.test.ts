import { describe, expect, it } from 'vitest';
import { parseChatRequest } from '../../node/model-server/chat.ts';
import { drawFault, Faults } from '../../node/model-server/faults.ts';
import { createTimingModel, llamaTimings } from '../../node/model-server/timing.ts';

describe('drawFault', () => {
  const f = Faults.parse({
    dropRate: 0.1,
    hangRate: 0.1,
    errorRate: 0.1,
    garbageRate: 0.1,
    slowRate: 0.1,
    slowFactor: 7,
  });

  it('stacks the rates in order: drop, hang, error, garbage, slow', () => {
    expect([0, 0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.99].map((x) => drawFault(f, x))).toEqual([
      { end: 'drop' },
      { end: 'drop' },
      { end: 'hang' },
      { end: 'error' },
      { end: 'garbage' },
      { slow: true, factor: 7 },
      { slow: false, factor: 1 },
      { slow: false, factor: 1 },
    ]);
  });

  it('never faults with the defaults, and counts a slow draw even at factor 1', () => {
    expect(drawFault(Faults.parse({}), 0)).toEqual({ slow: false, factor: 1 });
    expect(drawFault(Faults.parse({ slowRate: 1, slowFactor: 1 }), 0.5)).toEqual({ slow: true, factor: 1 });
  });

  it('rejects bad settings, naming the field', () => {
    expect(() => Faults.parse({ dropRate: 2 })).toThrow(/dropRate/);
    expect(() => Faults.parse({ typo: 1 })).toThrow(/typo/);
  });
});

describe('parseChatRequest', () => {
  it('maps an Ollama native request onto the OpenAI shape (streams unless told not to)', () => {
    const body = parseChatRequest(
      JSON.stringify({
        model: 'm',
        messages: [{ role: 'user', content: 'hi' }],
        options: { seed: 3, num_predict: 9 },
      }),
      'ollama-native',
    );
    expect(body).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      seed: 3,
      max_tokens: 9,
    });
    // num_predict <= 0 means "no limit" to Ollama.
    const unlimited = parseChatRequest(
      JSON.stringify({
        model: 'm',
        messages: [{ role: 'user', content: 'hi' }],
        stream: false,
        options: { num_predict: -1 },
      }),
      'ollama-native',
    );
    expect(unlimited).toEqual({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: false });
  });

  it('names the input and the field of a bad request', () => {
    expect(() => parseChatRequest('{', 'openai')).toThrow(/request body.*not JSON/);
    expect(() => parseChatRequest(JSON.stringify({ model: 'm', messages: [] }), 'openai')).toThrow(
      /request body.*messages/,
    );
    expect(() =>
      parseChatRequest(
        JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], n: 0 }),
        'openai',
      ),
    ).toThrow(/request body.*\bn\b/);
    expect(() =>
      parseChatRequest(
        JSON.stringify({ model: 'm', messages: [{ role: 'tool', content: 'x' }] }),
        'ollama-native',
      ),
    ).toThrow(/request body.*role/);
  });
});

describe('the timing model', () => {
  const rates = { prefillTps: 1000, decodeTps: 50, timeScale: 0, cachePrompts: 2, concurrency: 1 };

  it('charges a miss every prompt token and a hit one, and evicts the least recently used', async () => {
    const t = createTimingModel(rates);
    const signal = new AbortController().signal;
    expect(await t.prefill('a', 100, 1, signal)).toEqual({
      hit: false,
      cached: 0,
      evaluated: 100,
      prefillMs: 0,
      shared: false,
    });
    expect(await t.prefill('a', 100, 1, signal)).toEqual({
      hit: true,
      cached: 99,
      evaluated: 1,
      prefillMs: 0,
      shared: false,
    });
    await t.prefill('b', 10, 1, signal);
    await t.prefill('c', 10, 1, signal);
    expect(t.cacheKeys()).toEqual(['c', 'b']);
    expect((await t.prefill('a', 100, 1, signal))!.hit).toBe(false);
  });

  it('scales prefill and decode by rate, time scale and slow-down', async () => {
    const t = createTimingModel({ ...rates, timeScale: 0.001 });
    const p = (await t.prefill('a', 1000, 2, new AbortController().signal))!;
    expect(p.prefillMs).toBeCloseTo(2);
    expect(t.decodeMs(50, 3)).toBeCloseTo(3);
    const timings = llamaTimings(p, 50, t.decodeMs(50, 1), rates);
    expect(timings).toMatchObject({
      cache_n: 0,
      prompt_n: 1000,
      predicted_n: 50,
      predicted_per_second: 50_000,
    });
  });

  it('gives up a prefill when the client goes, without caching the prompt', async () => {
    const t = createTimingModel({ ...rates, timeScale: 1 });
    const gone = new AbortController();
    const pending = t.prefill('a', 10_000, 1, gone.signal);
    gone.abort();
    expect(await pending).toBeNull();
    expect(t.cacheKeys()).toEqual([]);
  });
});
