import type { ServerBehaviour } from './probe.ts';

/**
 * Whether a server kind honours OpenAI's `n` (one prefill shared by n completions), from its own code
 * (docs/model-servers.md has the references):
 * - `yes`: vLLM (ParentRequest fans n out into children with seed + index).
 * - `probe`: llama-server honours it since ggml-org/llama.cpp#17775 (children with seed + child index,
 *   n at most the slot count) and refused it before ("Only one completion choice is allowed"): ask once.
 * - `no`: Ollama's /v1 (ChatCompletionRequest has no `n` field: ignored, one choice), mlx_lm.server
 *   (never reads `n`: one choice), LM Studio and unidentified servers (not worth the risk).
 */
export const N_SUPPORT: Record<ServerBehaviour, 'yes' | 'probe' | 'no'> = {
  vllm: 'yes',
  'llama-server': 'probe',
  ollama: 'no',
  mlx: 'no',
  'lm-studio': 'no',
  openai: 'no',
};

/** Largest n one request may carry: llama-server refuses n above its slots ("n_cmpl cannot be greater than the number of slots"). */
export function maxChoices(behaviour: ServerBehaviour, slots: number): number {
  return behaviour === 'llama-server' ? Math.max(1, slots) : 64;
}

/** One request of a fan-out: `n` choices, choice i sampled with seed `seed + i`. */
export interface FanOutBatch {
  /** Sample indices, in choice order. */
  indices: number[];
  /** Seed sent with the request (the first sample's). */
  seed: number;
  /** Choices asked for (= indices.length). */
  n: number;
}

/**
 * Groups samples into requests. With `n`, runs of consecutive seeds share one request (at most `maxN`
 * choices), because llama-server and vLLM sample choice i with seed + i: every sample keeps its exact
 * seed, and non-consecutive seeds simply cost more requests. Without `n`, one request per sample.
 */
export function planFanOut(
  indices: readonly number[],
  seeds: readonly number[],
  useN: boolean,
  maxN: number,
): FanOutBatch[] {
  const batches: FanOutBatch[] = [];
  let current: FanOutBatch | null = null;
  for (const index of indices) {
    const seed = seeds[index];
    if (seed === undefined) throw new RangeError(`no seed for sample ${index}`);
    const fits =
      current !== null && useN && current.n < Math.max(1, maxN) && current.seed + current.n === seed;
    if (current !== null && fits) {
      current.indices.push(index);
      current.n++;
      continue;
    }
    current = { indices: [index], seed, n: 1 };
    batches.push(current);
  }
  return batches;
}

/** One choice as the split sees it. */
export interface ChoiceShape {
  /** Characters of its text. */
  chars: number;
  /** finish_reason was "length": it produced exactly max_tokens tokens. */
  truncated: boolean;
}

/**
 * Splits a response's `usage.completion_tokens`, which the OpenAI API sums over its choices, into
 * per-choice counts that add up to it exactly: a truncated choice has exactly `maxTokens`; the rest is
 * shared by characters (largest remainder). A single choice gets the whole count.
 */
export function splitCompletionTokens(
  total: number,
  choices: readonly ChoiceShape[],
  maxTokens: number,
): number[] {
  if (choices.length === 0) return [];
  if (choices.length === 1) return [total];
  const out = choices.map(() => 0);
  let left = total;
  const truncated = choices.flatMap((c, i) => (c.truncated ? [i] : []));
  // Only when the truncated ones fit in the total (a server that counts otherwise gets the plain share).
  if (truncated.length * maxTokens <= total && truncated.length < choices.length) {
    for (const i of truncated) out[i] = maxTokens;
    left -= truncated.length * maxTokens;
  }
  const rest = choices.flatMap((c, i) => (out[i] === 0 ? [{ i, chars: c.chars }] : []));
  const chars = rest.reduce((s, c) => s + c.chars, 0);
  const shares = rest.map((c) => ({
    i: c.i,
    exact: chars > 0 ? (left * c.chars) / chars : left / rest.length,
  }));
  let given = 0;
  for (const s of shares) {
    out[s.i] = Math.floor(s.exact);
    given += out[s.i]!;
  }
  const byRemainder = [...shares].sort(
    (a, b) => b.exact - Math.floor(b.exact) - (a.exact - Math.floor(a.exact)) || a.i - b.i,
  );
  for (let r = 0; r < left - given; r++) out[byRemainder[r % byRemainder.length]!.i]!++;
  return out;
}
