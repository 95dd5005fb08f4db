import { describe, expect, it } from 'vitest';
import { maxChoices, N_SUPPORT, planFanOut, splitCompletionTokens } from '../../node/models/fan-out.ts';

describe('planFanOut', () => {
  const seq = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

  it('puts a run of consecutive seeds in one request, choice i carrying seed + i', () => {
    const seeds = seq(100, 6);
    expect(planFanOut([1, 2, 3, 4, 5], seeds, true, 64)).toEqual([
      { indices: [1, 2, 3, 4, 5], seed: 101, n: 5 },
    ]);
  });

  it('cuts at maxN (llama-server: its slots)', () => {
    expect(planFanOut(seq(1, 5), seq(100, 6), true, 2)).toEqual([
      { indices: [1, 2], seed: 101, n: 2 },
      { indices: [3, 4], seed: 103, n: 2 },
      { indices: [5], seed: 105, n: 1 },
    ]);
  });

  it('starts a new request where seeds are not consecutive, so every sample keeps its own seed', () => {
    const seeds = [7, 8, 9, 50, 51, 3, 4];
    const batches = planFanOut(seq(1, 6), seeds, true, 64);
    expect(batches).toEqual([
      { indices: [1, 2], seed: 8, n: 2 },
      { indices: [3, 4], seed: 50, n: 2 },
      { indices: [5, 6], seed: 3, n: 2 },
    ]);
    for (const b of batches)
      for (const [choice, index] of b.indices.entries()) expect(b.seed + choice).toBe(seeds[index]);
  });

  it('never batches repeated or descending seeds', () => {
    expect(planFanOut([0, 1, 2], [5, 5, 4], true, 64).map((b) => b.n)).toEqual([1, 1, 1]);
  });

  it('without n: one request per sample, in order', () => {
    expect(planFanOut([1, 2, 3], seq(0, 4), false, 64)).toEqual([
      { indices: [1], seed: 1, n: 1 },
      { indices: [2], seed: 2, n: 1 },
      { indices: [3], seed: 3, n: 1 },
    ]);
  });

  it('treats maxN below 1 as 1, keeps the order of indices given, and takes none', () => {
    expect(planFanOut([2, 1], [0, 1, 2], true, 0).map((b) => b.indices)).toEqual([[2], [1]]);
    expect(planFanOut([], [], true, 4)).toEqual([]);
  });

  it('names a sample without a seed', () => {
    expect(() => planFanOut([3], [0, 1], true, 4)).toThrow(/no seed for sample 3/);
  });
});

describe('splitCompletionTokens', () => {
  const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);

  it('gives a single choice the whole count', () => {
    expect(splitCompletionTokens(37, [{ chars: 5, truncated: false }], 100)).toEqual([37]);
  });

  it('splits by characters and always adds up to the total (largest remainder)', () => {
    for (const [total, chars] of [
      [10, [1, 1, 1]],
      [100, [3, 5, 7, 11]],
      [7, [1000, 1, 1]],
      [0, [4, 4]],
      [5, [0, 0, 0]],
    ] as [number, number[]][]) {
      const out = splitCompletionTokens(
        total,
        chars.map((c) => ({ chars: c, truncated: false })),
        1000,
      );
      expect(sum(out)).toBe(total);
      expect(out.every((x) => Number.isInteger(x) && x >= 0)).toBe(true);
    }
    expect(
      splitCompletionTokens(
        30,
        [
          { chars: 10, truncated: false },
          { chars: 20, truncated: false },
        ],
        99,
      ),
    ).toEqual([10, 20]);
  });

  it('gives a truncated choice exactly max_tokens and shares the rest', () => {
    const out = splitCompletionTokens(
      250,
      [
        { chars: 900, truncated: true },
        { chars: 100, truncated: false },
        { chars: 300, truncated: false },
      ],
      200,
    );
    expect(out).toEqual([200, 13, 37]);
  });

  it('falls back to the plain share when the truncated choices cannot fit in the total', () => {
    const out = splitCompletionTokens(
      50,
      [
        { chars: 10, truncated: true },
        { chars: 10, truncated: false },
      ],
      200,
    );
    expect(out).toEqual([25, 25]);
  });

  it('shares by characters when every choice was truncated', () => {
    const out = splitCompletionTokens(
      400,
      [
        { chars: 800, truncated: true },
        { chars: 800, truncated: true },
      ],
      200,
    );
    expect(out).toEqual([200, 200]);
  });

  it('returns nothing for no choices', () => {
    expect(splitCompletionTokens(10, [], 5)).toEqual([]);
  });
});

describe('N_SUPPORT and maxChoices', () => {
  it('says which servers honour n, as their code does', () => {
    expect(N_SUPPORT).toEqual({
      vllm: 'yes',
      'llama-server': 'probe',
      ollama: 'no',
      mlx: 'no',
      'lm-studio': 'no',
      openai: 'no',
    });
  });

  it('caps n at llama-server slots only', () => {
    expect(maxChoices('llama-server', 4)).toBe(4);
    expect(maxChoices('llama-server', 0)).toBe(1);
    expect(maxChoices('vllm', 4)).toBe(64);
  });
});
