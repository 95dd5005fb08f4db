import type OpenAI from 'openai';
import { z } from 'zod';
import { fingerprint } from '../../protocol/canonical.ts';
import { type ExtractResult, extractCodeBlock } from '../../protocol/extract.ts';
import { parseWith } from '../../protocol/parse.ts';
import type { ChatMessage } from '../../protocol/task.ts';
import { createSemaphore, type Semaphore } from '../async/semaphore.ts';
import { sleep } from '../async/sleep.ts';
import { logger } from '../logger.ts';
import { AbortedError, ModelServerError, QueueFullError } from './errors.ts';
import { type FanOutBatch, maxChoices, N_SUPPORT, planFanOut, splitCompletionTokens } from './fan-out.ts';
import { describeFetchError, rethrowBadResponse } from './http.ts';
import type { ServerBehaviour } from './probe.ts';
import { classifyWarm, type WarmObservation, type WarmSet } from './warm.ts';

type OpenAISdk = typeof import('openai');
let openaiSdk: Promise<OpenAISdk> | undefined;
/** The openai SDK, loaded at the first request: an idle node (no campaign yet) does not hold its code. */
const loadOpenAI = (): Promise<OpenAISdk> => (openaiSdk ??= import('openai'));

const log = logger('vtnode:models:adapter');

/** Sampling parameters of one job. */
export interface Sampling {
  /** Sampling temperature (server default when absent). */
  temperature?: number;
  /** Nucleus sampling (server default when absent). */
  topP?: number;
  /** Output cap in tokens; an answer that hits it is truncated (finish_reason "length"). */
  maxTokens: number;
}

/** k samples of one prompt. */
export interface GenerateRequest {
  /** Model id as the server lists it. */
  model: string;
  /** The prompt. */
  messages: ChatMessage[];
  /** Samples wanted. */
  k: number;
  sampling: Sampling;
  /** One seed per sample (length k); default `seedBase + index`. */
  seeds?: number[];
  /** First seed when `seeds` is absent (default 0). */
  seedBase?: number;
  /** fingerprint(messages), computed when absent. */
  promptFingerprint?: string;
  /** Stops the job: queued requests are dropped, running ones cancelled. */
  signal?: AbortSignal;
}

/** Token counts of one sample. */
export interface SampleUsage {
  promptTokens: number;
  completionTokens: number;
  /** usage.prompt_tokens_details.cached_tokens (or llama-server timings.cache_n), null when not reported. */
  cachedTokens: number | null;
}

/** One generated sample. */
export interface Sample {
  /** Sample index within the job, 0..k-1. */
  index: number;
  /**
   * The sample's seed. With `n`, choice i of a request sent with seed s (llama-server and vLLM sample
   * it with s + i), so it is still this sample's own seed: the adapter batches only consecutive seeds.
   */
  seed: number;
  /** Choice index within its request (0 unless the request carried n > 1). */
  choice: number;
  model: string;
  /** Base URL of the server. */
  server: string;
  /** The raw answer. */
  text: string;
  /** The answer's one code block, or the flag that makes its reward 0. */
  extract: ExtractResult;
  finishReason: string;
  /** finish_reason was "length": the answer was cut at max_tokens. Reward 0. */
  truncated: boolean;
  usage: SampleUsage;
  /** What the response showed about the prompt cache. */
  warm: WarmObservation;
  /** Request start to last byte, ms (includes waiting for the server's prefill). */
  latencyMs: number;
  /** Time to first token, ms (streamed requests only). */
  ttftMs: number | null;
  /** Decode speed when the server's timings or streaming show it, else completion tokens ÷ latency. */
  tokensPerSecond: number;
  /** Requests it took (1 + retries). */
  attempts: number;
}

/** A sample that could not be generated. */
export interface SampleFailure {
  index: number;
  seed: number;
  error: Error;
  /** True when the failure is the server's (retryable elsewhere or later), false for bad requests. */
  retryable: boolean;
  attempts: number;
}

export type SampleOutcome = ({ ok: true } & Sample) | ({ ok: false } & SampleFailure);

export interface ModelAdapterOptions {
  /** Base URL of the server (no /v1). */
  url: string;
  /** The API the server speaks (from probing). */
  behaviour: ServerBehaviour;
  /** Requests sent at once (the server's concurrency). */
  concurrency: number;
  /** Requests in flight or due next (each job counts min(k, concurrency)) before new jobs are refused with QueueFullError. */
  maxQueued?: number;
  /** Milliseconds one request may take, response body included. */
  requestTimeoutMs?: number;
  /** Extra attempts after a connection error, timeout or 5xx. */
  retries?: number;
  /** First backoff, ms; doubles per retry, with jitter. */
  backoffMs?: number;
  /**
   * Use `n` for the fan-out: true, false, or 'auto' (default): from the server kind (fan-out.ts
   * N_SUPPORT), and for llama-server by asking once (a request with n > 1 that returns n choices).
   */
  useN?: boolean | 'auto';
  /** Most choices one request may carry (default: the slots for llama-server, which refuses more; 64 else). */
  maxN?: number;
  /** Stream responses (time to first token). Default: true where the server reports no cached-token count. */
  stream?: boolean;
  /** The node's warm set, updated from every response. */
  warm?: WarmSet;
  /** Bearer token, when the server wants one. */
  apiKey?: string;
  /** fetch implementation (tests). */
  fetch?: typeof fetch;
}

export interface ModelAdapter {
  /** Base URL of the server. */
  readonly url: string;
  /**
   * Generates k samples: the first request alone (it warms the prompt cache), then the other k-1 up to
   * the server's concurrency (or one n=k-1 request). Outcomes are yielded as soon as each is ready.
   * Throws QueueFullError at once when the server's queue cannot take this job's share of it
   * (min(k, concurrency) requests: what one job has in flight at most).
   */
  generate(request: GenerateRequest): AsyncIterable<SampleOutcome>;
  /** Requests queued (accepted, waiting), running, and the server's concurrency. */
  load(): { queued: number; running: number; capacity: number };
  /**
   * The server was found down (`reason`) or is back (null). While it is down, running requests fail at
   * once and new ones fail unsent (not retryable): a hung server would hold them until requestTimeoutMs.
   */
  setDown(reason: string | null): void;
  /** Whether this server honours `n`: true, false, or null while unknown (not asked yet). */
  honoursN(): boolean | null;
}

/** Kinds that count cached prompt tokens in usage (or timings): no need to stream for timing. */
const COUNTS_CACHED: Record<ServerBehaviour, boolean> = {
  'llama-server': true,
  mlx: true,
  vllm: true,
  ollama: false,
  'lm-studio': false,
  openai: false,
};

const Usage = z.looseObject({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  prompt_tokens_details: z
    .looseObject({ cached_tokens: z.number().int().min(0).nullable().optional() })
    .nullable()
    .optional(),
});
const Timings = z.looseObject({
  cache_n: z.number().int().min(0).optional(),
  prompt_n: z.number().int().min(0).optional(),
  predicted_per_second: z.number().min(0).optional(),
});
const Completion = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        index: z.number().int().min(0),
        message: z.looseObject({ content: z.string().nullable().optional() }),
        finish_reason: z.string().nullable(),
      }),
    )
    .min(1),
  usage: Usage,
  timings: Timings.optional(),
});
/**
 * A non-streamed answer: one completion object (every server; with n, vLLM puts all choices in it and
 * sums completion_tokens), or an array of them, one choice each with its own usage and timings: what
 * llama-server's handler sends when a request yields several results (`arr.size() == 1 ? arr[0] : arr`).
 */
const CompletionArray = z.array(Completion).min(1);
const Chunk = z.looseObject({
  choices: z.array(
    z.looseObject({
      index: z.number().int().min(0),
      delta: z.looseObject({ content: z.string().nullable().optional() }).optional(),
      finish_reason: z.string().nullable().optional(),
    }),
  ),
  usage: Usage.nullable().optional(),
  timings: Timings.optional(),
});

/** One choice of one answered request, before it becomes a Sample. */
interface Answer {
  text: string;
  finishReason: string;
  choice: number;
  /** The choice's own usage, when the server reported one per choice (llama-server's array answer). */
  usage: z.infer<typeof Usage> | null;
}
interface Response {
  answers: Answer[];
  usage: z.infer<typeof Usage>;
  timings: z.infer<typeof Timings> | null;
  latencyMs: number;
  ttftMs: number | null;
  decodeMs: number | null;
}

const CHAT_PATH = '/v1/chat/completions';

/** The body of one chat request: n only when above 1 (servers that predate n may refuse the field). */
function requestBody(req: GenerateRequest, seed: number, n: number) {
  return {
    model: req.model,
    messages: req.messages.map((m) => ({ role: m.role, content: m.content })),
    max_tokens: req.sampling.maxTokens,
    seed,
    ...(req.sampling.temperature !== undefined ? { temperature: req.sampling.temperature } : {}),
    ...(req.sampling.topP !== undefined ? { top_p: req.sampling.topP } : {}),
    ...(n > 1 ? { n } : {}),
  };
}

/**
 * The answers of a non-streamed response. One object: its choices share its usage (summed over them).
 * Several (one choice each): each choice keeps its own usage; the request's usage is the first one's
 * prompt and cache (the parent's prefill) with the completions summed, as the OpenAI API reports it.
 */
function fromCompletions(
  parts: z.infer<typeof Completion>[],
): Pick<Response, 'answers' | 'usage' | 'timings'> {
  const own = parts.length > 1;
  const answers = parts.flatMap((p) =>
    p.choices.map((c) => ({
      text: c.message.content ?? '',
      finishReason: c.finish_reason ?? 'unknown',
      choice: c.index,
      usage: own ? p.usage : null,
    })),
  );
  const first = parts[0]!;
  const usage = own
    ? { ...first.usage, completion_tokens: parts.reduce((s, p) => s + p.usage.completion_tokens, 0) }
    : first.usage;
  return { answers, usage, timings: first.timings ?? null };
}

/** A push-based async iterator: producers push outcomes, the consumer awaits them in arrival order. */
interface Channel<T> {
  /** Adds one item, waking the consumer. */
  push(item: T): void;
  /** No more items; with `err`, the consumer throws it once the items are drained. */
  close(err?: unknown): void;
  /** The items in arrival order, until closed. */
  drain(): AsyncGenerator<T>;
}

/** A new, open channel. */
function channel<T>(): Channel<T> {
  const items: T[] = [];
  let wake: (() => void) | null = null;
  let closed = false;
  let failure: unknown = null;
  return {
    push(item: T) {
      items.push(item);
      wake?.();
    },
    close(err?: unknown) {
      closed = true;
      if (err !== undefined) failure = err;
      wake?.();
    },
    async *drain(): AsyncGenerator<T> {
      while (true) {
        if (items.length > 0) {
          yield items.shift()!;
          continue;
        }
        if (failure !== null) throw failure;
        if (closed) return;
        await new Promise<void>((r) => {
          wake = r;
        });
        wake = null;
      }
    },
  };
}

/**
 * The samples of one answered request: choice c is sample `batch.indices[c]` with seed `batch.seed + c`
 * (how llama-server and vLLM seed their choices). Choices out of range or repeated are dropped (their
 * samples are then missing, and sent again by the caller). Usage per choice: its own when the server
 * reported one per choice, else its share of the request's completion tokens (fan-out.ts).
 */
function samplesOf(
  server: string,
  req: GenerateRequest,
  batch: FanOutBatch,
  response: Response,
  attempts: number,
  warm: WarmObservation,
): Sample[] {
  const { usage, timings } = response;
  const cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? timings?.cache_n ?? null;
  const seen = new Set<number>();
  const answers = [...response.answers]
    .sort((a, b) => a.choice - b.choice)
    .filter((a) => a.choice < batch.indices.length && !seen.has(a.choice) && seen.add(a.choice));
  const split = splitCompletionTokens(
    usage.completion_tokens,
    answers.map((a) => ({ chars: a.text.length, truncated: a.finishReason === 'length' })),
    req.sampling.maxTokens,
  );
  const decodeSeconds = response.decodeMs !== null ? response.decodeMs / 1000 : null;
  return answers.map((a, i) => {
    const completionTokens = a.usage?.completion_tokens ?? split[i]!;
    const tokensPerSecond =
      timings?.predicted_per_second ??
      (decodeSeconds !== null && decodeSeconds > 0 && completionTokens > 1
        ? (completionTokens - 1) / decodeSeconds
        : completionTokens / Math.max(response.latencyMs / 1000, 0.001));
    return {
      index: batch.indices[a.choice]!,
      seed: batch.seed + a.choice,
      choice: a.choice,
      model: req.model,
      server,
      text: a.text,
      extract: extractCodeBlock(a.text),
      finishReason: a.finishReason,
      truncated: a.finishReason === 'length',
      usage: {
        promptTokens: a.usage?.prompt_tokens ?? usage.prompt_tokens,
        completionTokens,
        cachedTokens: a.usage?.prompt_tokens_details?.cached_tokens ?? cachedTokens,
      },
      warm,
      latencyMs: response.latencyMs,
      ttftMs: response.ttftMs,
      tokensPerSecond,
      attempts,
    };
  });
}

/** The adapter's options with their defaults applied. */
interface Settings {
  /** Base URL of the server, without trailing slashes. */
  url: string;
  /** Requests sent at once (at least 1). */
  concurrency: number;
  /** Queue places (see ModelAdapterOptions.maxQueued). */
  maxQueued: number;
  /** Milliseconds one request may take, response body included. */
  requestTimeoutMs: number;
  /** Extra attempts after a retryable failure. */
  retries: number;
  /** First backoff, ms. */
  backoffMs: number;
  /** Whether single-choice requests are streamed. */
  stream: boolean;
  /** Most choices one request may carry. */
  maxN: number;
}

/** The options with their defaults. */
function settingsOf(options: ModelAdapterOptions): Settings {
  const concurrency = Math.max(1, options.concurrency);
  return {
    url: options.url.replace(/\/+$/, ''),
    concurrency,
    maxQueued: options.maxQueued ?? 64,
    requestTimeoutMs: options.requestTimeoutMs ?? 600_000,
    retries: options.retries ?? 2,
    backoffMs: options.backoffMs ?? 500,
    stream: options.stream ?? !COUNTS_CACHED[options.behaviour],
    maxN: Math.max(1, options.maxN ?? maxChoices(options.behaviour, concurrency)),
  };
}

/** Throws RangeError for a request the adapter cannot run (before anything is queued or sent). */
function validate(req: GenerateRequest): void {
  if (!Number.isInteger(req.k) || req.k < 1)
    throw new RangeError(`k must be a positive integer, got ${req.k}`);
  if (!Number.isInteger(req.sampling.maxTokens) || req.sampling.maxTokens < 1)
    throw new RangeError(`sampling.maxTokens must be a positive integer, got ${req.sampling.maxTokens}`);
  if (req.seeds && req.seeds.length !== req.k)
    throw new RangeError(`seeds has ${req.seeds.length} entries, expected k = ${req.k}`);
}

/** The error of a request abandoned because the server was found down. */
function wentDown(url: string, reason: string, cause?: unknown): ModelServerError {
  return new ModelServerError(url, `POST ${CHAT_PATH}: the server is down (${reason}); request abandoned`, {
    retryable: false,
    ...(cause ? { cause } : {}),
  });
}

/** The error of a request that had no complete answer within its timeout (retryable). */
function timedOut(url: string, timeoutMs: number, cause?: unknown): ModelServerError {
  return new ModelServerError(url, `POST ${CHAT_PATH}: no complete answer within ${timeoutMs} ms`, {
    retryable: true,
    ...(cause ? { cause } : {}),
  });
}

/** Rethrows a ParseError as the server's bad response to a chat completion, naming the fields; anything else as it is. */
function badResponse(url: string, err: unknown): never {
  rethrowBadResponse(url, `POST ${CHAT_PATH}`, err);
}

/** What a failed request was, as a ModelServerError: retryable when the server's (connection, timeout, 5xx, 429, 408). */
async function toServerError(url: string, timeoutMs: number, err: unknown): Promise<ModelServerError> {
  const { APIConnectionError, APIError, APIUserAbortError } = await loadOpenAI();
  if (err instanceof ModelServerError) return err;
  if (err instanceof APIUserAbortError) return timedOut(url, timeoutMs, err);
  if (err instanceof APIConnectionError)
    return new ModelServerError(
      url,
      `POST ${CHAT_PATH}: connection failed: ${describeFetchError(err.cause ?? err)}`,
      {
        retryable: true,
        cause: err,
      },
    );
  if (err instanceof APIError) {
    const status = err.status ?? 0;
    return new ModelServerError(url, `POST ${CHAT_PATH}: HTTP ${status}: ${err.message}`, {
      retryable: status >= 500 || status === 429 || status === 408,
      status,
      cause: err,
    });
  }
  // Anything else (a body that is not JSON, a broken stream) is the server's fault, not ours.
  return new ModelServerError(url, `POST ${CHAT_PATH}: unreadable response: ${(err as Error).message}`, {
    retryable: false,
    cause: err,
  });
}

type RequestBody = ReturnType<typeof requestBody>;

/** A whole answer parsed as the shape it has (one object or an array), so that an error names the field (a union would name none). */
function parseWhole(url: string, raw: unknown): z.infer<typeof Completion>[] {
  const where = `${url}${CHAT_PATH}`;
  try {
    return Array.isArray(raw) ? parseWith(CompletionArray, raw, where) : [parseWith(Completion, raw, where)];
  } catch (err) {
    return badResponse(url, err);
  }
}

/** A whole (not streamed) answer: one completion object, or llama-server's array of them. */
async function readWhole(
  url: string,
  client: OpenAI,
  body: RequestBody,
  signal: AbortSignal,
  started: number,
): Promise<Response> {
  const raw: unknown = await client.chat.completions.create({ ...body, stream: false }, { signal });
  const latencyMs = performance.now() - started;
  return { ...fromCompletions(parseWhole(url, raw)), latencyMs, ttftMs: null, decodeMs: null };
}

/** What a streamed answer has brought so far. */
interface StreamState {
  /** The text, all pieces so far. */
  text: string;
  /** The last finish_reason seen (null: none yet). */
  finishReason: string | null;
  /** The usage chunk's usage (null: none yet). */
  usage: z.infer<typeof Usage> | null;
  /** llama-server's timings, when sent. */
  timings: z.infer<typeof Timings> | null;
  /** When the first piece of text came (performance.now()), null before. */
  firstAt: number | null;
}

/** One chunk of a stream, parsed (a bad one is the server's bad response). */
function parseChunk(url: string, raw: unknown): z.infer<typeof Chunk> {
  try {
    return parseWith(Chunk, raw, `${url}${CHAT_PATH} (stream chunk)`);
  } catch (err) {
    return badResponse(url, err);
  }
}

/** Adds one chunk to what the stream has brought: its text, finish_reason, usage and timings. */
function absorbChunk(state: StreamState, chunk: z.infer<typeof Chunk>): void {
  for (const c of chunk.choices) {
    const piece = c.delta?.content;
    if (piece) {
      state.firstAt ??= performance.now();
      state.text += piece;
    }
    if (c.finish_reason) state.finishReason = c.finish_reason;
  }
  if (chunk.usage) state.usage = chunk.usage;
  if (chunk.timings) state.timings = chunk.timings;
}

/** The response of a stream that ended at `ended`; throws when it never had a finish_reason (cut off) or usage. */
function streamedResponse(url: string, state: StreamState, started: number, ended: number): Response {
  const { text, finishReason, usage, timings, firstAt } = state;
  if (finishReason === null)
    throw new ModelServerError(url, `POST ${CHAT_PATH}: stream ended before a finish_reason (cut off?)`, {
      retryable: true,
    });
  if (usage === null)
    throw new ModelServerError(
      url,
      `POST ${CHAT_PATH}: stream ended without usage (stream_options.include_usage ignored?)`,
    );
  return {
    answers: [{ text, finishReason, choice: 0, usage: null }],
    usage,
    timings,
    latencyMs: ended - started,
    ttftMs: firstAt === null ? null : firstAt - started,
    decodeMs: firstAt === null ? null : ended - firstAt,
  };
}

/** A streamed answer of one choice, read to its end; `cutOff` says why a stream that ended early did. */
async function readStream(
  url: string,
  client: OpenAI,
  body: RequestBody,
  signal: AbortSignal,
  started: number,
  cutOff: () => void,
): Promise<Response> {
  const chunks = await client.chat.completions.create(
    { ...body, stream: true, stream_options: { include_usage: true } },
    { signal },
  );
  const state: StreamState = { text: '', finishReason: null, usage: null, timings: null, firstAt: null };
  for await (const rawChunk of chunks) absorbChunk(state, parseChunk(url, rawChunk));
  const ended = performance.now();
  // The openai Stream ends quietly when its signal aborts: tell a cut-off stream from a complete one.
  cutOff();
  return streamedResponse(url, state, started, ended);
}

/** The three ways one request can be stopped: the caller's signal, its timeout, the server found down. */
interface RequestGuard {
  /** Fires when any of the three does. */
  signal: AbortSignal;
  /** The caller's signal (the job's). */
  caller: AbortSignal | undefined;
  /** Fires at the request timeout. */
  timer: AbortSignal;
  /** Aborted, with the reason, when the server is found down. */
  down: AbortController;
  /** Clears the timeout. */
  dispose(): void;
}

/** Arms the guard of one request: its timeout starts now. */
function guardRequest(caller: AbortSignal | undefined, timeoutMs: number): RequestGuard {
  const timer = new AbortController();
  const down = new AbortController();
  const timeout = setTimeout(() => timer.abort(), timeoutMs);
  const signal = AbortSignal.any([...(caller ? [caller] : []), timer.signal, down.signal]);
  return { signal, caller, timer: timer.signal, down, dispose: () => clearTimeout(timeout) };
}

/** Throws why a request was stopped, if it was: the caller aborted, the server went down, or it timed out. */
function throwIfStopped(s: Settings, guard: RequestGuard): void {
  if (guard.caller?.aborted) throw new AbortedError();
  if (guard.down.signal.aborted) throw wentDown(s.url, String(guard.down.signal.reason));
  if (guard.timer.aborted) throw timedOut(s.url, s.requestTimeoutMs);
}

/** The error a failed request throws: why it was stopped if it was, else what the server did. */
async function requestFailure(s: Settings, guard: RequestGuard, err: unknown): Promise<Error> {
  if (guard.caller?.aborted) return new AbortedError();
  if (guard.down.signal.aborted) return wentDown(s.url, String(guard.down.signal.reason), err);
  if (err instanceof AbortedError) return err;
  if (guard.timer.aborted && !(err instanceof ModelServerError))
    return timedOut(s.url, s.requestTimeoutMs, err);
  return toServerError(s.url, s.requestTimeoutMs, err);
}

/** The server's openai client, made at the first request (the SDK is loaded then) and kept. */
function clientOpener(s: Settings, options: ModelAdapterOptions): () => Promise<OpenAI> {
  let client: OpenAI | null = null;
  return async () => {
    const { default: OpenAIClient } = await loadOpenAI();
    client ??= new OpenAIClient({
      baseURL: `${s.url}/v1`,
      apiKey: options.apiKey ?? 'sk-no-key-required',
      maxRetries: 0,
      timeout: s.requestTimeoutMs + 5_000,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    return client;
  };
}

/** Sends single requests to one server, and abandons them when it is found down. */
interface Sender {
  /** One HTTP request, no retries. Throws ModelServerError (retryable or not) or AbortedError. */
  send(req: GenerateRequest, seed: number, n: number): Promise<Response>;
  /** The server is down (`reason`: running requests fail at once, new ones unsent) or back (null). */
  setDown(reason: string | null): void;
}

/** The sender of one server: its client, its requests in flight, and whether it is down. */
function createSender(s: Settings, options: ModelAdapterOptions): Sender {
  let downReason: string | null = null;
  const running = new Set<AbortController>();
  const openClient = clientOpener(s, options);
  return {
    async send(req, seed, n) {
      if (downReason !== null) throw wentDown(s.url, downReason);
      const guard = guardRequest(req.signal, s.requestTimeoutMs);
      running.add(guard.down);
      const body = requestBody(req, seed, n);
      const client = await openClient();
      const started = performance.now();
      try {
        // n > 1 is never streamed: the choices' chunks would interleave, and usage is per request anyway.
        if (!s.stream || n > 1) return await readWhole(s.url, client, body, guard.signal, started);
        return await readStream(s.url, client, body, guard.signal, started, () => throwIfStopped(s, guard));
      } catch (err) {
        throw await requestFailure(s, guard, err);
      } finally {
        guard.dispose();
        running.delete(guard.down);
      }
    },
    setDown(reason) {
      downReason = reason;
      if (reason !== null) for (const r of running) r.abort(reason);
    },
  };
}

/** An answered request and the attempts it took. */
interface Answered {
  response: Response;
  /** Requests it took (1 + retries). */
  attempts: number;
}

/** Records on a failure the attempts it took (read back by runBatch); returns it. */
function withAttempts(err: unknown, attempts: number): unknown {
  if (err instanceof Error) (err as Error & { attempts?: number }).attempts = attempts;
  return err;
}

/** The wait before attempt `attempt + 1`: backoffMs doubled per retry, half of it jitter. */
function backoffDelay(backoffMs: number, attempt: number): number {
  const delay = backoffMs * 2 ** (attempt - 1);
  return delay / 2 + Math.random() * (delay / 2);
}

/** A request with a slot and at most `extraAttempts` retries of retryable failures, with backoff. */
async function requestWithRetries(
  sender: Sender,
  slots: Semaphore,
  s: Settings,
  req: GenerateRequest,
  seed: number,
  n: number,
  extraAttempts: number,
): Promise<Answered> {
  for (let attempt = 1; ; attempt++) {
    // One permit per choice: an n-request occupies n of the server's slots (llama-server runs a
    // child per choice; vLLM batches n sequences), so load() and the other jobs see it.
    const release = await slots.acquire(req.signal, n);
    try {
      return { response: await sender.send(req, seed, n), attempts: attempt };
    } catch (err) {
      if (!(err instanceof ModelServerError) || !err.retryable || attempt > extraAttempts)
        throw withAttempts(err, attempt);
      log('%s (attempt %d/%d), retrying', err.message, attempt, s.retries + 1);
    } finally {
      release();
    }
    await sleep(backoffDelay(s.backoffMs, attempt), req.signal);
  }
}

/** What the adapter knows of the server's `n`, learned per server. */
interface NSupport {
  /** Whether the server honours n: true, false, or null while unknown (ask with the next fan-out). */
  readonly honours: boolean | null;
  /** Records what a response showed (logged when it changes what was known). */
  learn(honours: boolean, why: string): void;
  /** A request with n > 1 failed while asking, or was refused: a refusal answers, so does a second server error. */
  askFailed(err: unknown): void;
}

/** Whether n is honoured before asking: the caller's word, else the server kind's (null: ask). */
function initialHonoursN(options: ModelAdapterOptions): boolean | null {
  if (options.useN === true || options.useN === false) return options.useN;
  const support = N_SUPPORT[options.behaviour];
  return support === 'yes' ? true : support === 'no' ? false : null;
}

/** The n support of the server at `url`, starting from what its options and kind say. */
function createNSupport(url: string, options: ModelAdapterOptions): NSupport {
  let honours = initialHonoursN(options);
  let failedQuestions = 0; // requests with n > 1 that failed with a server error while n was unknown
  const learn = (value: boolean, why: string) => {
    if (honours === value) return;
    log('%s: n %s (%s)', url, value ? 'honoured' : 'not honoured, fanning out one request per sample', why);
    honours = value;
  };
  return {
    get honours() {
      return honours;
    },
    learn,
    askFailed(err) {
      // A refusal answers the question; a server error might be a hiccup: asked again next time, and
      // the second such failure answers it (old llama-server's refusal is a 500).
      const retryable = err instanceof ModelServerError && err.retryable;
      if (!retryable || ++failedQuestions >= 2) learn(false, (err as Error).message);
    },
  };
}

/** A request with n > 1 refused as a bad request (llama-server: "n_cmpl cannot be greater than the number of slots"). */
function refusedN(err: unknown): boolean {
  return err instanceof ModelServerError && (err.status === 400 || err.status === 422);
}

/** Reads what each response shows about the prompt cache. */
type WarmObserver = (req: GenerateRequest, prompt: string, response: Response) => WarmObservation;

/** The warm observer of one server: keeps each model's cold prefill rate, and updates `warmSet`. */
function createWarmObserver(warmSet: WarmSet | undefined): WarmObserver {
  const coldRates = new Map<string, number>(); // model -> slowest prefill rate seen (tokens per ms)
  return (req, prompt, response) => {
    const { usage, timings } = response;
    const coldRate = coldRates.get(req.model) ?? null;
    const warm = classifyWarm({
      promptTokens: usage.prompt_tokens,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? null,
      timings:
        timings?.cache_n !== undefined && timings.prompt_n !== undefined
          ? { cacheN: timings.cache_n, promptN: timings.prompt_n }
          : null,
      ttftMs: response.ttftMs,
      coldRate,
    });
    if (warm.source === 'ttft' && response.ttftMs !== null) {
      const rate = usage.prompt_tokens / Math.max(response.ttftMs, 0.001);
      if (coldRate === null || rate < coldRate) coldRates.set(req.model, rate);
    }
    warmSet?.observe(prompt, req.model, warm.warm);
    return warm;
  };
}

/** The server's queue: places reserved by the jobs it has accepted. */
interface Queue {
  /** Places reserved now. */
  readonly reserved: number;
  /** Reserves `share` places, or throws QueueFullError when they would exceed the limit. */
  reserve(share: number): void;
  /** Gives `count` places back. */
  release(count: number): void;
}

/** A queue of `maxQueued` places for the server at `url`. */
function createQueue(url: string, maxQueued: number): Queue {
  let reserved = 0;
  return {
    get reserved() {
      return reserved;
    },
    reserve(share) {
      if (reserved + share > maxQueued) throw new QueueFullError(url, share, reserved, maxQueued);
      reserved += share;
    },
    release(count) {
      reserved -= count;
    },
  };
}

/** A job's places in the queue, given back as its samples settle. */
interface QueueHold {
  /** Sample `index` has its outcome: gives back a place once fewer samples are left than held. */
  settle(index: number): void;
  /** Every sample is settled (the job ended early): gives back every place left. */
  settleAll(): void;
}

/** Reserves a job's share of the queue (or throws QueueFullError). */
function holdQueue(queue: Queue, k: number, concurrency: number): QueueHold {
  // A job holds at most `concurrency` of its requests in flight (the rest wait their turn here), so
  // it reserves that share of the queue, not all k: a job of k = 200 fits a queue of 64.
  const share = Math.min(k, concurrency);
  queue.reserve(share);
  const settled = new Set<number>();
  const held = () => Math.min(share, k - settled.size);
  const settle = (index: number) => {
    if (settled.has(index)) return;
    const before = held();
    settled.add(index);
    queue.release(before - held());
  };
  return {
    settle,
    settleAll: () => {
      for (let i = 0; i < k; i++) settle(i);
    },
  };
}

/** One job in the adapter: what it asks, and where its outcomes go. */
interface Job {
  req: GenerateRequest;
  /** The seed of each sample. */
  seeds: number[];
  /** The prompt's fingerprint (the warm set's key). */
  prompt: string;
  /** Its outcomes, in arrival order. */
  out: Channel<SampleOutcome>;
  /** Sends one outcome to the caller, and settles its sample. */
  deliver(outcome: SampleOutcome): void;
  /** Delivers sample `index` as failed with `err`. */
  fail(index: number, err: unknown, attempts: number): void;
  /** The job ended: gives back its places in the queue. */
  settleAll(): void;
}

/** The outcome of a sample that failed: retryable when the error is a retryable ModelServerError. */
function failureOf(index: number, seed: number, err: unknown, attempts: number): SampleOutcome {
  const error = err instanceof Error ? err : new Error(String(err));
  return {
    ok: false,
    index,
    seed,
    error,
    retryable: error instanceof ModelServerError ? error.retryable : false,
    attempts,
  };
}

/** Admits a job: reserves its share of the queue (or throws QueueFullError), then sets up its seeds and outcomes. */
function startJob(req: GenerateRequest, queue: Queue, concurrency: number): Job {
  const hold = holdQueue(queue, req.k, concurrency);
  const seeds = req.seeds ?? Array.from({ length: req.k }, (_, i) => (req.seedBase ?? 0) + i);
  const prompt =
    req.promptFingerprint ?? fingerprint(req.messages.map((m) => ({ role: m.role, content: m.content })));
  const out = channel<SampleOutcome>();
  const deliver = (outcome: SampleOutcome) => {
    out.push(outcome);
    hold.settle(outcome.index);
  };
  const fail = (index: number, err: unknown, attempts: number) =>
    deliver(failureOf(index, seeds[index]!, err, attempts));
  return { req, seeds, prompt, out, deliver, fail, settleAll: hold.settleAll };
}

/** What running jobs needs from the adapter. */
interface Runner {
  /** Base URL of the server. */
  url: string;
  /** Extra attempts per request (none while asking whether n is honoured). */
  retries: number;
  /** Most choices one request may carry. */
  maxN: number;
  /** What is known of the server's n. */
  n: NSupport;
  /** A request with a slot and at most `extraAttempts` retries. */
  request(req: GenerateRequest, seed: number, n: number, extraAttempts: number): Promise<Answered>;
  /** What a response showed about the prompt cache (and the warm set updated). */
  observeWarm: WarmObserver;
}

/**
 * Sends one request of a job and delivers its samples. A request with n > 1 that comes back with
 * fewer choices (the server ignored n), is refused as a bad request, or fails while n is still unknown
 * teaches that this server does not honour n, and its missing samples go out again one request each;
 * any other failure fails its samples (retryable when the server's: re-placed, never scored).
 * Resolves to whether the request succeeded (a single one: whether it brought its sample).
 */
async function runBatch(run: Runner, job: Job, batch: FanOutBatch): Promise<boolean> {
  // Asking whether n is honoured takes one attempt: llama-server before #17775 refused n > 1 with a
  // 500 ("Only one completion choice is allowed"), which retries would only repeat.
  const probing = batch.n > 1 && run.n.honours === null;
  let answered: Answered;
  try {
    answered = await run.request(job.req, batch.seed, batch.n, probing ? 0 : run.retries);
  } catch (err) {
    return batchFailed(run, job, batch, probing, err);
  }
  return batchAnswered(run, job, batch, answered);
}

/** A request of a job failed: an n-request that asked or was refused goes out again singly (true), else its samples fail (false). */
async function batchFailed(
  run: Runner,
  job: Job,
  batch: FanOutBatch,
  probing: boolean,
  err: unknown,
): Promise<boolean> {
  if (err instanceof AbortedError) throw err;
  if (batch.n > 1 && (probing || refusedN(err))) {
    run.n.askFailed(err);
    await fanOut(run, job, batch.indices, true);
    return true;
  }
  const attempts = (err as { attempts?: number }).attempts ?? 1;
  for (const index of batch.indices) job.fail(index, err, attempts);
  return false;
}

/**
 * A request of a job was answered: delivers its samples, learns from an n-request, and sends the
 * samples an n-request did not bring again singly. A single request without its one choice (choice 0)
 * fails its sample: sent again, it would come back the same, for ever. Resolves to false then.
 */
async function batchAnswered(
  run: Runner,
  job: Job,
  batch: FanOutBatch,
  answered: Answered,
): Promise<boolean> {
  const { response, attempts } = answered;
  const warm = run.observeWarm(job.req, job.prompt, response);
  const samples = samplesOf(run.url, job.req, batch, response, attempts, warm);
  for (const s of samples) job.deliver({ ok: true, ...s });
  if (batch.n > 1)
    run.n.learn(samples.length === batch.n, `asked for n=${batch.n}, got ${samples.length} choices`);
  const got = new Set(samples.map((s) => s.index));
  const missing = batch.indices.filter((i) => !got.has(i));
  if (missing.length === 0) return true;
  if (batch.n > 1) {
    await fanOut(run, job, missing, true);
    return true;
  }
  for (const index of missing) job.fail(index, noChoiceZero(run.url, response), attempts);
  return false;
}

/** The error of a single-choice answer whose choices are all out of range (none is choice 0). */
function noChoiceZero(url: string, response: Response): ModelServerError {
  const got = response.answers.map((a) => a.choice).join(', ');
  return new ModelServerError(
    url,
    `POST ${CHAT_PATH}: bad response: choices: no choice 0 (got index ${got})`,
  );
}

/**
 * The fan-out: one n-request per run of consecutive seeds where n is honoured (or unknown), else (or
 * `singly`: the samples an n-request did not bring) one request per sample.
 */
async function fanOut(run: Runner, job: Job, indices: number[], singly = false): Promise<void> {
  const batches = planFanOut(indices, job.seeds, !singly && run.n.honours !== false, run.maxN);
  await Promise.all(batches.map((b) => runBatch(run, job, b)));
}

/** Warm, then fan out: the first request alone, so the prompt is evaluated once. */
async function runJob(run: Runner, job: Job): Promise<void> {
  const firstOk = await runBatch(run, job, { indices: [0], seed: job.seeds[0]!, n: 1 });
  const rest = Array.from({ length: job.req.k - 1 }, (_, i) => i + 1);
  if (rest.length === 0) return;
  if (!firstOk) {
    // The server just failed this prompt after its retries: do not hammer it k-1 more times.
    const last = new ModelServerError(run.url, "skipped: the job's first request failed", {
      retryable: true,
    });
    for (const index of rest) job.fail(index, last, 0);
    return;
  }
  await fanOut(run, job, rest);
}

/** Runs a job in the background; its outcomes as they come, then the job's error if it failed (AbortedError). */
function outcomesOf(run: Runner, job: Job): AsyncIterable<SampleOutcome> {
  runJob(run, job).then(
    () => job.out.close(),
    (err) => {
      job.settleAll();
      job.out.close(err);
    },
  );
  return { [Symbol.asyncIterator]: () => job.out.drain() };
}

/**
 * An adapter for one OpenAI-compatible server, built on the `openai` client: k samples per prompt with
 * warm-then-fan-out, per-sample usage/timing/warmth, bounded queue, retries with backoff on
 * connection errors, timeouts and 5xx. Server errors become failed outcomes, never exceptions that
 * escape (only QueueFullError at admission and AbortedError when the caller aborts).
 */
export function createModelAdapter(options: ModelAdapterOptions): ModelAdapter {
  const settings = settingsOf(options);
  const { url, concurrency } = settings;
  const slots = createSemaphore(concurrency);
  const queue = createQueue(url, settings.maxQueued);
  const sender = createSender(settings, options);
  const n = createNSupport(url, options);
  const run: Runner = {
    url,
    retries: settings.retries,
    maxN: settings.maxN,
    n,
    request: (req, seed, count, extraAttempts) =>
      requestWithRetries(sender, slots, settings, req, seed, count, extraAttempts),
    observeWarm: createWarmObserver(options.warm),
  };
  return {
    url,
    load: () => ({
      queued: Math.max(0, queue.reserved - slots.running),
      running: slots.running,
      capacity: concurrency,
    }),
    setDown: (reason) => sender.setDown(reason),
    honoursN: () => n.honours,
    generate(req) {
      validate(req);
      return outcomesOf(run, startJob(req, queue, concurrency));
    },
  };
}
