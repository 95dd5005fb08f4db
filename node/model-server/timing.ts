import { createSemaphore } from '../async/semaphore.ts';
import { pause } from '../async/sleep.ts';
import { createPromptCache } from './lru.ts';

/** Token estimate used throughout the emulator: characters / 4, rounded up. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** Options of {@link createTimingModel}. */
export interface TimingOptions {
  /** Prompt tokens evaluated per second (uncached part only). */
  prefillTps: number;
  /** Output tokens generated per second per request. */
  decodeTps: number;
  /** Multiplies every simulated duration. */
  timeScale: number;
  /** Prompts the LRU prompt cache holds. */
  cachePrompts: number;
  /** Requests processed at once (slots); more wait in a queue. */
  concurrency: number;
  /** A request whose prompt another request is prefilling waits for that prefill instead of evaluating it again. */
  sharePrefill?: boolean;
}

/** How a prompt was evaluated. */
export interface Prefill {
  /** Whether the prompt was in the cache. */
  hit: boolean;
  /** Prompt tokens taken from the cache. */
  cached: number;
  /** Prompt tokens evaluated. */
  evaluated: number;
  /** Simulated prefill time, ms. */
  prefillMs: number;
  /** The prompt came from another request's prefill that was running when this one arrived. */
  shared: boolean;
}

/** Slots, one compute engine shared by prefills, and the LRU prompt cache of one server. */
export interface TimingModel {
  /** Waits for a slot (rejects when `signal` fires first); resolves to its release. */
  acquireSlot(signal: AbortSignal): Promise<() => void>;
  /** Slots in use. */
  readonly running: number;
  /**
   * Evaluates a prompt in a slot: a cache hit costs one token, a miss every token, one prefill at a time
   * (compute-bound); then the prompt is cached. Null when the client went away meanwhile.
   */
  prefill(
    promptKey: string,
    promptTokens: number,
    slow: number,
    signal: AbortSignal,
  ): Promise<Prefill | null>;
  /** Simulated decode time of `tokens` output tokens, ms. */
  decodeMs(tokens: number, slow: number): number;
  /** The cached prompts' keys, most recently used first. */
  cacheKeys(): string[];
  /** Empties the prompt cache. */
  clearCache(): void;
}

/** Waits for `p`, or rejects when `signal` fires first. */
function abortable(p: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}

/** The cache/timing model of one emulated server. */
export function createTimingModel(o: TimingOptions): TimingModel {
  const cache = createPromptCache(Math.max(0, o.cachePrompts));
  const slots = createSemaphore(Math.max(1, o.concurrency));
  const engine = createSemaphore(1);
  const inflight = new Map<string, Promise<void>>(); // prompt -> its running prefill (sharePrefill)
  return {
    acquireSlot: (signal) => slots.acquire(signal),
    get running() {
      return slots.running;
    },
    async prefill(promptKey, promptTokens, slow, signal) {
      let shared = false;
      // Another request is evaluating this prompt now: wait for it (it may give up; then look again).
      for (
        let running = inflight.get(promptKey);
        o.sharePrefill && running;
        running = inflight.get(promptKey)
      ) {
        try {
          await abortable(running, signal);
        } catch {
          return null;
        }
        shared = true;
      }
      const hit = cache.hit(promptKey);
      const cached = hit ? Math.max(0, promptTokens - 1) : 0;
      const evaluated = promptTokens - cached;
      const prefillMs = (evaluated / o.prefillTps) * 1000 * o.timeScale * slow;
      let finish: (() => void) | null = null;
      if (!hit && o.sharePrefill) {
        inflight.set(promptKey, new Promise<void>((r) => (finish = r)));
      }
      try {
        if (prefillMs > 0) {
          let done: (() => void) | null = null;
          try {
            done = await engine.acquire(signal);
            await pause(prefillMs, signal);
          } catch {
            return null;
          } finally {
            done?.();
          }
        }
        if (signal.aborted) return null;
        cache.add(promptKey);
        return { hit, cached, evaluated, prefillMs, shared: shared && hit };
      } finally {
        if (finish) {
          inflight.delete(promptKey);
          (finish as () => void)();
        }
      }
    },
    decodeMs: (tokens, slow) => (tokens / o.decodeTps) * 1000 * o.timeScale * slow,
    cacheKeys: () => cache.keys(),
    clearCache: () => cache.clear(),
  };
}

/** llama-server's `timings` object for one request. */
export function llamaTimings(p: Prefill, decodeTokens: number, decodeMs: number, o: TimingOptions) {
  return {
    cache_n: p.cached,
    prompt_n: p.evaluated,
    prompt_ms: p.prefillMs,
    prompt_per_token_ms: p.evaluated > 0 ? p.prefillMs / p.evaluated : 0,
    prompt_per_second: p.prefillMs > 0 ? (p.evaluated * 1000) / p.prefillMs : o.prefillTps,
    predicted_n: decodeTokens,
    predicted_ms: decodeMs,
    predicted_per_token_ms: decodeMs / decodeTokens,
    predicted_per_second: decodeMs > 0 ? (decodeTokens * 1000) / decodeMs : o.decodeTps,
  };
}
