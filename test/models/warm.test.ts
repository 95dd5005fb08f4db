import { describe, expect, it } from 'vitest';
import { classifyWarm, createWarmSet } from '../../node/models/warm.ts';

const P = (i: number) => `sha256:${i.toString(16).padStart(64, '0')}`;
const base = { promptTokens: 2000, cachedTokens: null, timings: null, ttftMs: null, coldRate: null };

describe('classifyWarm', () => {
  it('trusts cached_tokens first: warm when at least half the prompt was cached', () => {
    expect(classifyWarm({ ...base, cachedTokens: 1999 })).toEqual({ warm: 'warm', source: 'cached_tokens' });
    expect(classifyWarm({ ...base, cachedTokens: 999 })).toEqual({ warm: 'cold', source: 'cached_tokens' });
    expect(classifyWarm({ ...base, cachedTokens: 0, ttftMs: 1, coldRate: 1 })).toEqual({
      warm: 'cold',
      source: 'cached_tokens',
    });
  });

  it('reads llama-server timings when there is no cached count', () => {
    expect(classifyWarm({ ...base, timings: { cacheN: 1990, promptN: 10 } })).toEqual({
      warm: 'warm',
      source: 'timings',
    });
    expect(classifyWarm({ ...base, timings: { cacheN: 0, promptN: 2000 } })).toEqual({
      warm: 'cold',
      source: 'timings',
    });
  });

  it('compares the prefill rate with the slowest seen when only time to first token is known (Ollama /v1)', () => {
    expect(classifyWarm({ ...base, ttftMs: 1000 })).toEqual({ warm: 'unknown', source: 'ttft' });
    const coldRate = 2000 / 1000; // tokens per ms
    expect(classifyWarm({ ...base, ttftMs: 900, coldRate })).toEqual({ warm: 'cold', source: 'ttft' });
    expect(classifyWarm({ ...base, ttftMs: 240, coldRate })).toEqual({ warm: 'warm', source: 'ttft' });
    expect(classifyWarm({ ...base, promptTokens: 100, ttftMs: 1, coldRate })).toEqual({
      warm: 'unknown',
      source: null,
    });
  });
});

describe('warm set', () => {
  it('keeps observed-warm prompts newest first, capped, drops a prompt seen cold, and signals changes', () => {
    const set = createWarmSet(3);
    let changes = 0;
    set.addEventListener('change', () => changes++);
    for (let i = 0; i < 5; i++) set.observe(P(i), 'm', 'warm');
    expect(set.entries().map((e) => e.prompt)).toEqual([P(4), P(3), P(2)]);
    set.observe(P(2), 'm', 'warm');
    expect(set.entries().map((e) => e.prompt)).toEqual([P(2), P(4), P(3)]);
    const before = changes;
    set.observe(P(2), 'm', 'warm'); // already newest: no change
    set.observe(P(9), 'm', 'cold'); // not listed: no change
    set.observe(P(3), 'm', 'unknown');
    expect(changes).toBe(before);
    set.observe(P(4), 'm', 'cold');
    expect(set.entries()).toEqual([
      { prompt: P(2), model: 'm' },
      { prompt: P(3), model: 'm' },
    ]);
    expect(set.has(P(2), 'm')).toBe(true);
    expect(set.has(P(2), 'other')).toBe(false);
    expect(changes).toBe(before + 1);
  });
});
