import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { z } from 'zod';
import { fingerprint } from '../../protocol/canonical.ts';
import { ParseError, parseWith } from '../../protocol/parse.ts';
import type { Task } from '../../protocol/task.ts';
import { VTNODE_VERSION } from '../../protocol/version.ts';
import { createSemaphore } from '../async/semaphore.ts';
import { pause } from '../async/sleep.ts';
import { logger } from '../logger.ts';
import { EMULATOR_HEADER, EMULATOR_PATH } from '../models/probe.ts';
import { createPromptCache } from './lru.ts';
import { rng } from './random.ts';
import { type CandidateKind, loadScriptedTasks, type ScriptMode, scriptCandidate } from './script.ts';

const log = logger('vtnode:model-server');

/** Server kinds the emulator imitates. */
export const EmulateKind = z.enum(['llama-server', 'ollama', 'mlx']);
export type EmulateKind = z.infer<typeof EmulateKind>;

const rate = z.number().min(0).max(1);
/** Injectable faults, drawn per chat request from a seeded sequence (in this order: drop, hang, error, garbage, slow). */
export const Faults = z.strictObject({
  /** Share of requests whose connection is destroyed without an answer. */
  dropRate: rate.default(0),
  /** Share of requests that never get an answer (until the client gives up or the server closes). */
  hangRate: rate.default(0),
  /** Share of requests answered with HTTP 500. */
  errorRate: rate.default(0),
  /** Share of requests answered with HTTP 200 and a body that is no chat completion (probes still answer). */
  garbageRate: rate.default(0),
  /** Share of requests that run `slowFactor` times slower. */
  slowRate: rate.default(0),
  /** Slow-down of a slow request. */
  slowFactor: z.number().min(1).max(10_000).default(10),
  /** Seed of the fault sequence. */
  seed: z.number().int().default(1),
});
export type Faults = z.infer<typeof Faults>;
export type FaultsInput = z.input<typeof Faults>;

export interface EmulatorOptions {
  /** Which server to imitate: endpoints, usage fields and timings follow it. */
  emulate: EmulateKind;
  /** TCP port; 0 (default) picks a free one. */
  port?: number;
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** Tasks whose prompts the emulator recognises (their references are read from workspace.root + target). */
  tasks?: Task[];
  /** Model ids listed by /v1/models (default ["vtnode-emulated-coder"]). */
  models?: string[];
  /** Prompt tokens evaluated per second (uncached part only). */
  prefillTps?: number;
  /** Output tokens generated per second per request. */
  decodeTps?: number;
  /** Multiplies every simulated duration (0.01 = 100 times faster than the rates say). */
  timeScale?: number;
  /** Prompts the LRU prompt cache holds. */
  cachePrompts?: number;
  /** Requests processed at once (llama-server slots); more wait in a queue. */
  concurrency?: number;
  /** Context length reported by the kind-specific endpoints. */
  context?: number;
  /** Where answers come from. */
  script?: ScriptMode;
  /** Faults injected from the start. */
  faults?: FaultsInput;
}

/** Counters of what the emulator did, for tests and benchmarks. */
export interface EmulatorStats {
  requests: number;
  completed: number;
  faults: { drop: number; hang: number; error: number; garbage: number; slow: number };
  promptTokens: number;
  /** Prompt tokens actually evaluated (the uncached part). */
  prefillTokens: number;
  cachedTokens: number;
  cacheHits: number;
  cacheMisses: number;
  completionTokens: number;
  truncated: number;
  maxRunning: number;
  candidates: Record<CandidateKind, number>;
}

export interface Emulator {
  /** Base URL, e.g. http://127.0.0.1:41234 (append /v1 for the openai client). */
  url: string;
  port: number;
  /** Replaces the fault settings (fields left out take their defaults). */
  setFaults(faults: FaultsInput): void;
  /** A copy of the counters. */
  stats(): EmulatorStats;
  /** Empties the prompt cache and zeroes the counters. */
  reset(): void;
  /** Stops listening and drops every connection (hung ones included). */
  close(): Promise<void>;
}

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
type ChatApi = 'openai' | 'ollama-native';

const DEFAULT_MAX_TOKENS = 8192;
const MAX_BODY = 16 * 1024 * 1024;
const VERSIONS: Record<EmulateKind, string> = {
  'llama-server': 'b6500-emulated',
  ollama: '0.12.6',
  mlx: '0.28.0',
};

/** Token estimate used throughout the emulator: characters / 4, rounded up. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function promptText(messages: ChatRequest['messages']): { role: string; content: string }[] {
  return messages.map((m) => ({
    role: m.role,
    content: typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join(''),
  }));
}

function emptyStats(): EmulatorStats {
  return {
    requests: 0,
    completed: 0,
    faults: { drop: 0, hang: 0, error: 0, garbage: 0, slow: 0 },
    promptTokens: 0,
    prefillTokens: 0,
    cachedTokens: 0,
    cacheHits: 0,
    cacheMisses: 0,
    completionTokens: 0,
    truncated: 0,
    maxRunning: 0,
    candidates: { reference: 0, mutant: 0, garbage: 0, truncate: 0, 'unknown-prompt': 0 },
  };
}

/**
 * Starts an OpenAI-compatible HTTP server that behaves like llama-server, Ollama or mlx_lm.server for
 * dry runs, drills, tests and benchmarks: no weights, scripted answers, simulated prefill/decode time,
 * an LRU prompt cache, and injectable faults.
 */
export async function createEmulator(options: EmulatorOptions): Promise<Emulator> {
  const emulate = options.emulate;
  const models = options.models && options.models.length > 0 ? options.models : ['vtnode-emulated-coder'];
  const prefillTps = options.prefillTps ?? 1500;
  const decodeTps = options.decodeTps ?? 40;
  const timeScale = options.timeScale ?? 1;
  const concurrency = options.concurrency ?? 1;
  const context = options.context ?? 32_768;
  const script = options.script ?? 'mixed';
  if (!(prefillTps > 0) || !(decodeTps > 0)) throw new Error('prefillTps and decodeTps must be positive');
  if (!(timeScale >= 0)) throw new Error('timeScale must be >= 0');
  const tasks = await loadScriptedTasks(options.tasks ?? []);
  const cache = createPromptCache(Math.max(0, options.cachePrompts ?? 4));
  const slots = createSemaphore(Math.max(1, concurrency));
  const engine = createSemaphore(1);
  let faults = parseWith(Faults, options.faults ?? {}, 'emulator faults');
  let faultRng = rng(faults.seed);
  let stats = emptyStats();
  let autoSeed = 0;
  const loaded = new Map<string, number>(); // ollama: model -> loaded at (ms)
  const started = Date.now();
  const sockets = new Set<Socket>();

  const kindHeaders = (res: ServerResponse) => {
    res.setHeader(EMULATOR_HEADER, emulate);
    if (emulate === 'mlx') res.setHeader('server', 'BaseHTTP/0.6 Python/3.12.8');
    if (emulate === 'llama-server') res.setHeader('server', 'llama.cpp');
  };

  const sendJson = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  };
  const sendError = (res: ServerResponse, status: number, message: string, type = 'invalid_request_error') =>
    sendJson(res, status, { error: { code: status, message, type } });
  const notFound = (res: ServerResponse) => {
    if (emulate === 'ollama') {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('404 page not found');
    } else if (emulate === 'mlx') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('Not Found');
    } else {
      sendError(res, 404, 'File Not Found', 'not_found_error');
    }
  };

  const readBody = (req: IncomingMessage): Promise<string> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) {
          reject(new Error(`request body over ${MAX_BODY} bytes`));
          req.destroy();
        } else chunks.push(c);
      });
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });

  const info = () => ({
    emulator: 'vtnode',
    emulate,
    version: `vtnode-${VTNODE_VERSION}-${VERSIONS[emulate]}`,
    models,
    concurrency,
    context,
    cachePrompts: options.cachePrompts ?? 4,
    prefillTps,
    decodeTps,
    timeScale,
    script,
    tasks: tasks.size,
    faults,
    cache: cache.keys(),
    stats,
  });

  const handleGet = (path: string, res: ServerResponse) => {
    if (path === '/v1/models' || path === '/models') {
      sendJson(res, 200, {
        object: 'list',
        data: models.map((id) => ({
          id,
          object: 'model',
          created: Math.floor(started / 1000),
          owned_by: emulate === 'ollama' ? 'library' : emulate === 'llama-server' ? 'llamacpp' : 'mlx',
        })),
      });
      return;
    }
    if (path === EMULATOR_PATH) return sendJson(res, 200, info());
    switch (emulate) {
      case 'llama-server':
        if (path === '/health') return sendJson(res, 200, { status: 'ok' });
        if (path === '/props')
          return sendJson(res, 200, {
            default_generation_settings: {
              n_ctx: context,
              params: { n_predict: -1, temperature: 0.8, top_p: 0.95, seed: -1 },
            },
            total_slots: concurrency,
            model_path: `/models/${models[0]}.gguf`,
            chat_template: '',
            build_info: VERSIONS['llama-server'],
          });
        break;
      case 'ollama':
        if (path === '/') {
          res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
          res.end('Ollama is running');
          return;
        }
        if (path === '/api/version') return sendJson(res, 200, { version: VERSIONS.ollama });
        if (path === '/api/tags')
          return sendJson(res, 200, {
            models: models.map((name) => ({
              name,
              model: name,
              modified_at: new Date(started).toISOString(),
              size: 18_556_700_761,
              digest: fingerprint(name).slice(7),
            })),
          });
        if (path === '/api/ps')
          return sendJson(res, 200, {
            models: [...loaded.keys()].map((name) => ({
              name,
              model: name,
              size: 18_556_700_761 + context * 98_304,
              digest: fingerprint(name).slice(7),
              details: {
                format: 'gguf',
                family: 'emulated',
                parameter_size: '30.5B',
                quantization_level: 'Q4_K_M',
              },
              expires_at: new Date(Date.now() + 300_000).toISOString(),
              size_vram: 18_556_700_761 + context * 98_304,
              context_length: context,
            })),
          });
        break;
      case 'mlx':
        if (path === '/health') return sendJson(res, 200, { status: 'ok' });
        break;
    }
    notFound(res);
  };

  const handleChat = async (req: IncomingMessage, res: ServerResponse, api: ChatApi) => {
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
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch (err) {
        throw new ParseError('request body', [{ path: '', message: `not JSON (${(err as Error).message})` }]);
      }
      if (api === 'ollama-native') {
        const native = parseWith(OllamaChatRequest, json, 'request body');
        const o = native.options ?? {};
        body = {
          model: native.model,
          messages: native.messages,
          stream: native.stream ?? true, // Ollama streams unless told otherwise
          ...(o.seed !== undefined ? { seed: o.seed } : {}),
          ...(o.num_predict !== undefined && o.num_predict > 0 ? { max_tokens: o.num_predict } : {}),
        };
      } else {
        body = parseWith(ChatRequest, json, 'request body');
      }
    } catch (err) {
      return fail(400, (err as Error).message);
    }
    if (!models.includes(body.model))
      return fail(404, `model "${body.model}" not found, try pulling it first`, 'not_found_error');
    stats.requests++;

    // Faults, drawn in a fixed order from the seeded sequence.
    const x = faultRng.next();
    let slow = 1;
    if (x < faults.dropRate) {
      stats.faults.drop++;
      req.socket.destroy();
      return;
    }
    if (x < faults.dropRate + faults.hangRate) {
      stats.faults.hang++;
      return; // never answered; close() destroys the socket
    }
    if (x < faults.dropRate + faults.hangRate + faults.errorRate) {
      stats.faults.error++;
      return fail(500, 'emulated server error (vtnode model-server fault injection)', 'server_error');
    }
    if (x < faults.dropRate + faults.hangRate + faults.errorRate + faults.garbageRate) {
      stats.faults.garbage++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"object":"chat.completion","choices":[{"message":{"con');
      return;
    }
    if (x < faults.dropRate + faults.hangRate + faults.errorRate + faults.garbageRate + faults.slowRate) {
      stats.faults.slow++;
      slow = faults.slowFactor;
    }

    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    const messages = promptText(body.messages);
    const promptKey = fingerprint(messages);
    const promptTokens = messages.reduce((n, m) => n + estimateTokens(m.content) + 4, 0);
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? DEFAULT_MAX_TOKENS;
    const n = api === 'ollama-native' ? 1 : (body.n ?? 1);
    const startedAt = performance.now();
    const baseSeed = body.seed ?? 0x5eed0000 + autoSeed++;
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
    let release: (() => void) | null = null;
    try {
      release = await slots.acquire(gone.signal);
    } catch {
      return; // client went away while queued
    }
    try {
      stats.maxRunning = Math.max(stats.maxRunning, slots.running);
      const hit = cache.hit(promptKey);
      const cached = hit ? Math.max(0, promptTokens - 1) : 0;
      const evaluated = promptTokens - cached;
      const prefillMs = (evaluated / prefillTps) * 1000 * timeScale * slow;
      if (prefillMs > 0) {
        // Prompt evaluation is compute-bound: concurrent prefills share one engine, one after another.
        let done: (() => void) | null = null;
        try {
          done = await engine.acquire(gone.signal);
          await pause(prefillMs, gone.signal);
        } catch {
          return;
        } finally {
          done?.();
        }
      }
      if (gone.signal.aborted) return;
      cache.add(promptKey);
      if (emulate === 'ollama') loaded.set(body.model, Date.now());
      stats.promptTokens += promptTokens;
      stats.prefillTokens += evaluated;
      stats.cachedTokens += cached;
      if (hit) stats.cacheHits++;
      else stats.cacheMisses++;

      const entry = tasks.get(promptKey) ?? null;
      const choices = Array.from({ length: n }, (_, i) => {
        const cand = scriptCandidate(script, entry, promptKey, baseSeed, i, maxTokens);
        stats.candidates[cand.kind]++;
        const limit = maxTokens * 4;
        const truncated = cand.text.length > limit;
        const text = truncated ? cand.text.slice(0, limit) : cand.text;
        if (truncated) stats.truncated++;
        return { text, tokens: Math.max(1, estimateTokens(text)), finish: truncated ? 'length' : 'stop' };
      });
      const completionTokens = choices.reduce((s, c) => s + c.tokens, 0);
      const decodeTokens = Math.max(...choices.map((c) => c.tokens)); // choices decode as one batch
      const decodeMs = (decodeTokens / decodeTps) * 1000 * timeScale * slow;
      const usage: Record<string, unknown> = {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
      };
      if (emulate !== 'ollama') usage['prompt_tokens_details'] = { cached_tokens: cached };
      const timings =
        emulate === 'llama-server'
          ? {
              cache_n: cached,
              prompt_n: evaluated,
              prompt_ms: prefillMs,
              prompt_per_token_ms: evaluated > 0 ? prefillMs / evaluated : 0,
              prompt_per_second: prefillMs > 0 ? (evaluated * 1000) / prefillMs : prefillTps,
              predicted_n: decodeTokens,
              predicted_ms: decodeMs,
              predicted_per_token_ms: decodeMs / decodeTokens,
              predicted_per_second: decodeMs > 0 ? (decodeTokens * 1000) / decodeMs : decodeTps,
            }
          : undefined;
      const fingerprintField = emulate === 'ollama' ? 'fp_ollama' : VERSIONS[emulate];
      // Ollama's native metrics: durations in nanoseconds; prompt_eval_count includes cached tokens.
      const nativeLine = (content: string, done: boolean) => ({
        model: body.model,
        created_at: new Date().toISOString(),
        message: { role: 'assistant', content },
        done,
        ...(done
          ? {
              done_reason: choices[0]!.finish,
              total_duration: Math.round((performance.now() - startedAt) * 1e6),
              load_duration: 0,
              prompt_eval_count: promptTokens,
              prompt_eval_duration: Math.round(prefillMs * 1e6),
              eval_count: choices[0]!.tokens,
              eval_duration: Math.round(decodeMs * 1e6),
            }
          : {}),
      });

      if (!streaming) {
        await pause(decodeMs, gone.signal);
        if (gone.signal.aborted) return;
        stats.completionTokens += completionTokens;
        stats.completed++;
        if (api === 'ollama-native') return sendJson(res, 200, nativeLine(choices[0]!.text, true));
        return sendJson(res, 200, {
          id,
          object: 'chat.completion',
          created,
          model: body.model,
          system_fingerprint: fingerprintField,
          choices: choices.map((c, index) => ({
            index,
            message: { role: 'assistant', content: c.text },
            finish_reason: c.finish,
            logprobs: null,
          })),
          usage,
          ...(timings ? { timings } : {}),
        });
      }

      const chunk = (payload: Record<string, unknown>) =>
        res.write(
          `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, system_fingerprint: fingerprintField, ...payload })}\n\n`,
        );
      const pieces = 16;
      if (api === 'ollama-native') {
        const text = choices[0]!.text;
        const size = Math.ceil(text.length / pieces);
        for (let p = 0; p < pieces; p++) {
          await pause(decodeMs / pieces, gone.signal);
          if (gone.signal.aborted) return;
          const part = text.slice(p * size, (p + 1) * size);
          if (part) res.write(`${JSON.stringify(nativeLine(part, false))}\n`);
        }
        res.end(`${JSON.stringify(nativeLine('', true))}\n`);
        stats.completionTokens += completionTokens;
        stats.completed++;
        return;
      }
      for (const [index] of choices.entries())
        chunk({ choices: [{ index, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
      for (let p = 0; p < pieces; p++) {
        await pause(decodeMs / pieces, gone.signal);
        if (gone.signal.aborted) return;
        for (const [index, c] of choices.entries()) {
          const size = Math.ceil(c.text.length / pieces);
          const part = c.text.slice(p * size, (p + 1) * size);
          if (part) chunk({ choices: [{ index, delta: { content: part }, finish_reason: null }] });
        }
      }
      for (const [index, c] of choices.entries())
        chunk({
          choices: [{ index, delta: {}, finish_reason: c.finish }],
          ...(timings && index === n - 1 ? { timings } : {}),
        });
      if (body.stream_options?.include_usage) chunk({ choices: [], usage });
      res.end('data: [DONE]\n\n');
      stats.completionTokens += completionTokens;
      stats.completed++;
    } finally {
      release();
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    kindHeaders(res);
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (req.method === 'GET') return handleGet(path, res);
    if (req.method === 'POST' && (path === '/v1/chat/completions' || path === '/chat/completions'))
      return handleChat(req, res, 'openai');
    if (req.method === 'POST' && path === '/api/chat' && emulate === 'ollama')
      return handleChat(req, res, 'ollama-native');
    if (req.method === 'POST' && path === `${EMULATOR_PATH}/faults`) {
      try {
        const next = parseWith(Faults, JSON.parse(await readBody(req)), 'faults');
        faults = next;
        faultRng = rng(next.seed);
        return sendJson(res, 200, { faults });
      } catch (err) {
        return sendError(res, 400, (err as Error).message);
      }
    }
    if (req.method === 'POST' && path === `${EMULATOR_PATH}/reset`) {
      cache.clear();
      stats = emptyStats();
      return sendJson(res, 200, { ok: true });
    }
    notFound(res);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error(`request ${req.method} ${req.url} failed: ${(err as Error).stack ?? String(err)}`);
      if (!res.headersSent) sendError(res, 500, 'internal emulator error', 'server_error');
      else res.destroy();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  log('emulating %s on %s (%d tasks)', emulate, url, tasks.size);

  return {
    url,
    port: address.port,
    setFaults(f) {
      faults = parseWith(Faults, f, 'faults');
      faultRng = rng(faults.seed);
    },
    stats: () => structuredClone(stats),
    reset() {
      cache.clear();
      stats = emptyStats();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
