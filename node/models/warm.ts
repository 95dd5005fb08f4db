import { MAX_ADVERT_WARM, type WarmEntry } from '../../protocol/advert.ts';

/** Whether a response showed the prompt's KV cache warm, and from what evidence. */
export interface WarmObservation {
  warm: 'warm' | 'cold' | 'unknown';
  /** `cached_tokens` (usage.prompt_tokens_details), `timings` (llama-server cache_n), `ttft` (prefill rate), or null. */
  source: 'cached_tokens' | 'timings' | 'ttft' | null;
}

export interface WarmEvidence {
  /** usage.prompt_tokens. */
  promptTokens: number;
  /** usage.prompt_tokens_details.cached_tokens, or null when the server reports none (Ollama /v1). */
  cachedTokens: number | null;
  /** llama-server `timings`: cache_n (prompt tokens reused) and prompt_n (evaluated). */
  timings: { cacheN: number; promptN: number } | null;
  /** Time to first token of a streamed response, ms. */
  ttftMs: number | null;
  /** Slowest prefill rate seen for this model (tokens/s of prompt per ms of TTFT), or null before any. */
  coldRate: number | null;
}

/** Share of the prompt that must come from the cache to call it warm. */
export const WARM_CACHED_SHARE = 0.5;
/** A prefill this many times faster than the slowest seen is taken as a cache hit. */
export const WARM_SPEEDUP = 4;
/** Prompts shorter than this say nothing through timing (overheads dominate). */
export const MIN_TIMED_PROMPT_TOKENS = 256;

/**
 * Classifies one response. Servers that count cached tokens (llama-server, mlx_lm.server, vLLM with
 * prompt-tokens details) say it directly; llama-server's `timings.cache_n` says it too. Ollama's /v1
 * reports neither (its usage has only prompt/completion/total tokens), so there the prefill rate
 * (prompt tokens ÷ time to first token of a streamed answer) is compared with the slowest rate
 * seen for the model: a warm prefill is many times faster than a cold one.
 */
export function classifyWarm(e: WarmEvidence): WarmObservation {
  if (e.cachedTokens !== null && e.promptTokens > 0)
    return {
      warm: e.cachedTokens / e.promptTokens >= WARM_CACHED_SHARE ? 'warm' : 'cold',
      source: 'cached_tokens',
    };
  if (e.timings !== null && e.timings.cacheN + e.timings.promptN > 0) {
    const share = e.timings.cacheN / (e.timings.cacheN + e.timings.promptN);
    return { warm: share >= WARM_CACHED_SHARE ? 'warm' : 'cold', source: 'timings' };
  }
  if (e.ttftMs !== null && e.promptTokens >= MIN_TIMED_PROMPT_TOKENS) {
    if (e.coldRate === null) return { warm: 'unknown', source: 'ttft' };
    const rate = e.promptTokens / Math.max(e.ttftMs, 0.001);
    return { warm: rate >= WARM_SPEEDUP * e.coldRate ? 'warm' : 'cold', source: 'ttft' };
  }
  return { warm: 'unknown', source: null };
}

/** A node's observed-warm prompts, newest first, capped: what its advert gossips as `warm`. */
export interface WarmSet extends EventTarget {
  /** Records what a response showed: warm moves the entry to the front, cold removes it (evicted). */
  observe(prompt: string, model: string, warm: WarmObservation['warm']): void;
  /** Newest first. */
  entries(): WarmEntry[];
  /** True when `prompt` is warm on `model`. */
  has(prompt: string, model: string): boolean;
}

export function createWarmSet(cap: number = MAX_ADVERT_WARM): WarmSet {
  const entries = new Map<string, WarmEntry>();
  const key = (prompt: string, model: string) => `${model}\u0000${prompt}`;
  const target = new EventTarget();
  return Object.assign(target, {
    observe(prompt: string, model: string, warm: WarmObservation['warm']) {
      const k = key(prompt, model);
      if (warm === 'warm') {
        const wasNewest = [...entries.keys()].at(-1) === k;
        entries.delete(k);
        entries.set(k, { prompt, model });
        while (entries.size > cap) entries.delete(entries.keys().next().value as string);
        if (!wasNewest) target.dispatchEvent(new Event('change'));
      } else if (warm === 'cold' && entries.delete(k)) {
        target.dispatchEvent(new Event('change'));
      }
    },
    entries: () => [...entries.values()].reverse(),
    has: (prompt: string, model: string) => entries.has(key(prompt, model)),
  });
}
