import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { fingerprint } from '../../protocol/canonical.ts';
import { ParseError, parseWith } from '../../protocol/parse.ts';
import { pause } from '../async/sleep.ts';
import type { EmulatorStats } from './emulator.ts';
import { type FaultDraw, inflictFault } from './faults.ts';
import { type EmulateKind, N_HANDLING, VERSIONS } from './flavours.ts';
import { readBody, sendError, sendJson } from './http.ts';
import { type ScriptedTask, type ScriptMode, scriptCandidate } from './script.ts';
import {
  estimateTokens,
  llamaTimings,
  type Prefill,
  type TimingModel,
  type TimingOptions,
} from './timing.ts';

const ContentPart = z.object({ type: z.literal('text'), text: z.string() });
const ChatRequest = z.looseObject({
  model: z.string().min(1),
  messages: z
    .array(
      z.looseObject({
        role: z.enum(['system', 'user', 'assistant']),
        content: z.union([z.string(), z.array(ContentPart)]),
      }),
    )
    .min(1),
  temperature: z.number().min(0).max(5).optional(),
  top_p: z.number().min(0).max(1).optional(),
  max_tokens: z.number().int().min(1).optional(),
  max_completion_tokens: z.number().int().min(1).optional(),
  seed: z.number().int().optional(),
  n: z.number().int().min(1).max(64).optional(),
  stream: z.boolean().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
});
type ChatRequest = z.infer<typeof ChatRequest>;

/** Ollama's native POST /api/chat request (the fields the emulator uses). */
const OllamaChatRequest = z.looseObject({
  model: z.string().min(1),
  messages: z
    .array(z.looseObject({ role: z.enum(['system', 'user', 'assistant']), content: z.string() }))
    .min(1),
  stream: z.boolean().optional(),
  options: z
    .looseObject({
      seed: z.number().int().optional(),
      temperature: z.number().min(0).optional(),
      top_p: z.number().min(0).max(1).optional(),
      num_predict: z.number().int().optional(),
    })
    .optional(),
});

/** Which API a chat request came through: OpenAI-compatible /v1, or Ollama's native /api/chat. */
export type ChatApi = 'openai' | 'ollama-native';

const DEFAULT_MAX_TOKENS = 8192;
/** Pieces a streamed answer is sent in. */
const PIECES = 16;

/** What the chat handlers read and update of the emulator. */
export interface ChatContext {
  /** Which server is imitated. */
  kind: EmulateKind;
  /** Model ids served. */
  models: readonly string[];
  /** Where answers come from. */
  script: ScriptMode;
  /** Known prompts, by prompt fingerprint. */
  tasks: ReadonlyMap<string, ScriptedTask>;
  /** Slots, prefill engine and prompt cache. */
  timing: TimingModel;
  /** The rates the timing model runs at (for llama-server's timings). */
  rates: TimingOptions;
  /** The current counters (a new object after a reset). */
  stats(): EmulatorStats;
  /** The next draw of the fault sequence. */
  drawFault(): FaultDraw;
  /** The next seed for a request that gives none. */
  nextSeed(): number;
  /** Ollama: notes that `model` is loaded now. */
  markLoaded(model: string): void;
}

/** Parses a chat request body of either API into the OpenAI shape (ParseError names the field). */
export function parseChatRequest(raw: string, api: ChatApi): ChatRequest {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    throw new ParseError('request body', [{ path: '', message: `not JSON (${(err as Error).message})` }]);
  }
  if (api === 'openai') return parseWith(ChatRequest, json, 'request body');
  const native = parseWith(OllamaChatRequest, json, 'request body');
  const o = native.options ?? {};
  return {
    model: native.model,
    messages: native.messages,
    stream: native.stream ?? true, // Ollama streams unless told otherwise
    ...(o.seed !== undefined ? { seed: o.seed } : {}),
    ...(o.num_predict !== undefined && o.num_predict > 0 ? { max_tokens: o.num_predict } : {}),
  };
}

function promptText(messages: ChatRequest['messages']): { role: string; content: string }[] {
  return messages.map((m) => ({
    role: m.role,
    content: typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join(''),
  }));
}

/** One answer of a request. */
interface Choice {
  text: string;
  tokens: number;
  finish: 'length' | 'stop';
}

/** The scripted answers to a prompt, cut at max_tokens (characters / 4). */
function scriptChoices(
  ctx: ChatContext,
  promptKey: string,
  seed: number,
  n: number,
  maxTokens: number,
): Choice[] {
  const entry = ctx.tasks.get(promptKey) ?? null;
  // Choice i is sampled with seed + i, as llama-server (add_child) and vLLM (ParentRequest) seed theirs:
  // the same answer as a request of its own with that seed.
  return Array.from({ length: n }, (_, i) => {
    const cand = scriptCandidate(ctx.script, entry, promptKey, seed + i, 0, maxTokens);
    ctx.stats().candidates[cand.kind]++;
    const limit = maxTokens * 4;
    const truncated = cand.text.length > limit;
    const text = truncated ? cand.text.slice(0, limit) : cand.text;
    if (truncated) ctx.stats().truncated++;
    return { text, tokens: Math.max(1, estimateTokens(text)), finish: truncated ? 'length' : 'stop' };
  });
}

/** Everything an answer is written from, once the prompt is evaluated and the choices are known. */
interface Answer {
  ctx: ChatContext;
  body: ChatRequest;
  res: ServerResponse;
  gone: AbortSignal;
  choices: Choice[];
  prefill: Prefill;
  promptTokens: number;
  decodeTokens: number;
  decodeMs: number;
  startedAt: number;
  id: string;
  created: number;
}

const completionTokensOf = (a: Answer) => a.choices.reduce((s, c) => s + c.tokens, 0);

function usageOf(a: Answer): Record<string, unknown> {
  const completion = completionTokensOf(a);
  const usage: Record<string, unknown> = {
    prompt_tokens: a.promptTokens,
    completion_tokens: completion,
    total_tokens: a.promptTokens + completion,
  };
  if (a.ctx.kind !== 'ollama') usage['prompt_tokens_details'] = { cached_tokens: a.prefill.cached };
  return usage;
}

/**
 * llama-server's answer to n > 1 (not streamed): its handler sends one result per task, parent then
 * children, as an array (`arr.size() == 1 ? arr[0] : arr`), each with one choice, its own usage and
 * timings. The children copy the parent's evaluated prompt (copy_state_to), so they report it cached.
 */
function llamaServerResults(a: Answer) {
  return a.choices.map((c, index) => {
    const prefill: Prefill =
      index === 0
        ? a.prefill
        : { hit: true, cached: a.promptTokens, evaluated: 0, prefillMs: 0, shared: false };
    return {
      id: a.id,
      object: 'chat.completion',
      created: a.created,
      model: a.body.model,
      system_fingerprint: systemFingerprint(a.ctx.kind),
      choices: [{ index, message: { role: 'assistant', content: c.text }, finish_reason: c.finish }],
      usage: {
        prompt_tokens: a.promptTokens,
        completion_tokens: c.tokens,
        total_tokens: a.promptTokens + c.tokens,
        prompt_tokens_details: { cached_tokens: prefill.cached },
      },
      timings: llamaTimings(prefill, c.tokens, a.decodeMs, a.ctx.rates),
    };
  });
}

const timingsOf = (a: Answer) =>
  a.ctx.kind === 'llama-server'
    ? llamaTimings(a.prefill, a.decodeTokens, a.decodeMs, a.ctx.rates)
    : undefined;

const systemFingerprint = (kind: EmulateKind) => (kind === 'ollama' ? 'fp_ollama' : VERSIONS[kind]);

function completed(a: Answer): void {
  a.ctx.stats().completionTokens += completionTokensOf(a);
  a.ctx.stats().completed++;
}

/** Ollama's native answer line: durations in nanoseconds; prompt_eval_count includes cached tokens. */
function nativeLine(a: Answer, content: string, done: boolean) {
  return {
    model: a.body.model,
    created_at: new Date().toISOString(),
    message: { role: 'assistant', content },
    done,
    ...(done
      ? {
          done_reason: a.choices[0]!.finish,
          total_duration: Math.round((performance.now() - a.startedAt) * 1e6),
          load_duration: 0,
          prompt_eval_count: a.promptTokens,
          prompt_eval_duration: Math.round(a.prefill.prefillMs * 1e6),
          eval_count: a.choices[0]!.tokens,
          eval_duration: Math.round(a.decodeMs * 1e6),
        }
      : {}),
  };
}

/** A whole answer at once, after the decode time. */
async function answerWhole(a: Answer, api: ChatApi): Promise<void> {
  await pause(a.decodeMs, a.gone);
  if (a.gone.aborted) return;
  completed(a);
  if (api === 'ollama-native') return sendJson(a.res, 200, nativeLine(a, a.choices[0]!.text, true));
  if (a.ctx.kind === 'llama-server' && a.choices.length > 1)
    return sendJson(a.res, 200, llamaServerResults(a));
  const timings = timingsOf(a);
  sendJson(a.res, 200, {
    id: a.id,
    object: 'chat.completion',
    created: a.created,
    model: a.body.model,
    system_fingerprint: systemFingerprint(a.ctx.kind),
    choices: a.choices.map((c, index) => ({
      index,
      message: { role: 'assistant', content: c.text },
      finish_reason: c.finish,
      logprobs: null,
    })),
    usage: usageOf(a),
    ...(timings ? { timings } : {}),
  });
}

/** Ollama's native stream: NDJSON lines, the last one with the metrics. */
async function streamOllama(a: Answer): Promise<void> {
  const text = a.choices[0]!.text;
  const size = Math.ceil(text.length / PIECES);
  for (let p = 0; p < PIECES; p++) {
    await pause(a.decodeMs / PIECES, a.gone);
    if (a.gone.aborted) return;
    const part = text.slice(p * size, (p + 1) * size);
    if (part) a.res.write(`${JSON.stringify(nativeLine(a, part, false))}\n`);
  }
  a.res.end(`${JSON.stringify(nativeLine(a, '', true))}\n`);
  completed(a);
}

/** OpenAI's server-sent events: a role chunk per choice, the text in pieces, finish chunks, usage. */
async function streamOpenAi(a: Answer): Promise<void> {
  const { res, choices } = a;
  const fp = systemFingerprint(a.ctx.kind);
  const chunk = (payload: Record<string, unknown>) =>
    res.write(
      `data: ${JSON.stringify({ id: a.id, object: 'chat.completion.chunk', created: a.created, model: a.body.model, system_fingerprint: fp, ...payload })}\n\n`,
    );
  for (const [index] of choices.entries())
    chunk({ choices: [{ index, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  for (let p = 0; p < PIECES; p++) {
    await pause(a.decodeMs / PIECES, a.gone);
    if (a.gone.aborted) return;
    for (const [index, c] of choices.entries()) {
      const size = Math.ceil(c.text.length / PIECES);
      const part = c.text.slice(p * size, (p + 1) * size);
      if (part) chunk({ choices: [{ index, delta: { content: part }, finish_reason: null }] });
    }
  }
  const timings = timingsOf(a);
  for (const [index, c] of choices.entries())
    chunk({
      choices: [{ index, delta: {}, finish_reason: c.finish }],
      ...(timings && index === choices.length - 1 ? { timings } : {}),
    });
  if (a.body.stream_options?.include_usage) chunk({ choices: [], usage: usageOf(a) });
  res.end('data: [DONE]\n\n');
  completed(a);
}

/** Choices a request gets: n where the server honours it, else one (Ollama, mlx_lm.server ignore n). */
function choicesOf(kind: EmulateKind, body: ChatRequest, api: ChatApi): number {
  return api === 'ollama-native' || N_HANDLING[kind] === 'ignore' ? 1 : (body.n ?? 1);
}

/**
 * llama-server's n: one slot per choice. The parent decodes its choice in its own slot and frees it;
 * each child waits for a slot of its own (SLOT_STATE_WAIT_OTHER until the parent's prompt is done, then
 * copy_state_to) and decodes with the prompt copied. The answer goes when every choice is done.
 */
async function decodeInSlots(a: Answer, slow: number, releaseParent: () => void): Promise<void> {
  const { ctx, gone } = a;
  const parent = (async () => {
    try {
      await pause(ctx.timing.decodeMs(a.choices[0]!.tokens, slow), gone);
    } finally {
      releaseParent();
    }
  })();
  const children = a.choices.slice(1).map(async (c) => {
    let free: (() => void) | null = null;
    try {
      free = await ctx.timing.acquireSlot(gone);
      const stats = ctx.stats();
      stats.maxRunning = Math.max(stats.maxRunning, ctx.timing.running);
      await pause(ctx.timing.decodeMs(c.tokens, slow), gone);
    } catch {
      // the client went away while the child waited for a slot
    } finally {
      free?.();
    }
  });
  await Promise.all([parent, ...children]);
}

/** Options of {@link answerInSlot}. */
interface SlotRun {
  ctx: ChatContext;
  body: ChatRequest;
  res: ServerResponse;
  api: ChatApi;
  slow: number;
}

/** Queues for a slot, evaluates the prompt, then answers (whole or streamed); gives up when the client goes. */
async function answerInSlot({ ctx, body, res, api, slow }: SlotRun): Promise<void> {
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  const messages = promptText(body.messages);
  const promptKey = fingerprint(messages);
  const promptTokens = messages.reduce((n, m) => n + estimateTokens(m.content) + 4, 0);
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? DEFAULT_MAX_TOKENS;
  const n = choicesOf(ctx.kind, body, api);
  const startedAt = performance.now();
  const seed = body.seed ?? ctx.nextSeed();
  const streaming = body.stream === true;
  const id = `chatcmpl-${randomUUID().replaceAll('-', '').slice(0, 24)}`;
  const created = Math.floor(Date.now() / 1000);
  if (streaming) {
    res.writeHead(200, {
      'content-type': api === 'ollama-native' ? 'application/x-ndjson' : 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.flushHeaders();
  }
  let release: () => void;
  try {
    release = await ctx.timing.acquireSlot(gone.signal);
  } catch {
    return; // client went away while queued
  }
  try {
    const stats = ctx.stats();
    stats.maxRunning = Math.max(stats.maxRunning, ctx.timing.running);
    const prefill = await ctx.timing.prefill(promptKey, promptTokens, slow, gone.signal);
    if (!prefill) return;
    if (ctx.kind === 'ollama') ctx.markLoaded(body.model);
    const s = ctx.stats();
    s.promptTokens += promptTokens;
    s.prefillTokens += prefill.evaluated;
    s.cachedTokens += prefill.cached;
    if (prefill.hit) s.cacheHits++;
    else s.cacheMisses++;
    if (prefill.shared) s.sharedPrefills++;
    const choices = scriptChoices(ctx, promptKey, seed, n, maxTokens);
    const decodeTokens = Math.max(...choices.map((c) => c.tokens)); // choices decode as one batch
    const decodeMs = ctx.timing.decodeMs(decodeTokens, slow);
    const answer: Answer = {
      ctx,
      body,
      res,
      gone: gone.signal,
      choices,
      prefill,
      promptTokens,
      decodeTokens,
      decodeMs,
      startedAt,
      id,
      created,
    };
    if (!streaming && ctx.kind === 'llama-server' && n > 1) {
      await decodeInSlots(answer, slow, release);
      if (gone.signal.aborted) return;
      completed(answer);
      sendJson(res, 200, llamaServerResults(answer));
    } else if (!streaming) await answerWhole(answer, api);
    else if (api === 'ollama-native') await streamOllama(answer);
    else await streamOpenAi(answer);
  } finally {
    release();
  }
}

/** POST /v1/chat/completions (OpenAI-compatible) or /api/chat (Ollama's native API). */
export async function handleChat(
  ctx: ChatContext,
  req: IncomingMessage,
  res: ServerResponse,
  api: ChatApi,
): Promise<void> {
  const fail = (status: number, message: string, type?: string) =>
    api === 'ollama-native'
      ? sendJson(res, status, { error: message })
      : sendError(res, status, message, type);
  let raw: string;
  try {
    raw = await readBody(req);
  } catch (err) {
    return fail(413, (err as Error).message);
  }
  let body: ChatRequest;
  try {
    body = parseChatRequest(raw, api);
  } catch (err) {
    return fail(400, (err as Error).message);
  }
  if (!ctx.models.includes(body.model))
    return fail(404, `model "${body.model}" not found, try pulling it first`, 'not_found_error');
  // llama-server runs n's children in slots of their own: params_from_json_cmpl refuses more than it has.
  if (ctx.kind === 'llama-server' && api === 'openai' && (body.n ?? 1) > ctx.rates.concurrency)
    return fail(400, 'n_cmpl cannot be greater than the number of slots, please increase -np');
  ctx.stats().requests++;
  ctx.stats().samples += choicesOf(ctx.kind, body, api);
  const fault = ctx.drawFault();
  if ('end' in fault) {
    ctx.stats().faults[fault.end]++;
    return inflictFault(fault.end, { req, res, fail });
  }
  if (fault.slow) ctx.stats().faults.slow++;
  return answerInSlot({ ctx, body, res, api, slow: fault.factor });
}
