import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { parseWith } from '../../protocol/parse.ts';
import type { Task } from '../../protocol/task.ts';
import { VTNODE_VERSION } from '../../protocol/version.ts';
import { logger } from '../logger.ts';
import { EMULATOR_PATH } from '../models/probe.ts';
import { type ChatContext, handleChat } from './chat.ts';
import { drawFault, Faults, type FaultsInput } from './faults.ts';
import {
  type EmulateKind,
  type FlavourView,
  flavourGet,
  flavourHeaders,
  modelList,
  notFound,
  SHARES_INFLIGHT_PREFILL,
  VERSIONS,
} from './flavours.ts';
import { readBody, sendError, sendJson } from './http.ts';
import { rng } from './random.ts';
import { type CandidateKind, loadScriptedTasks, type ScriptMode } from './script.ts';
import { createTimingModel, type TimingOptions } from './timing.ts';

export { Faults, type FaultsInput } from './faults.ts';
export { EmulateKind } from './flavours.ts';
export { estimateTokens } from './timing.ts';

const log = logger('vtnode:model-server');

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
  /** A request waits for an identical prompt's running prefill instead of evaluating it again (default: as the emulated server does, flavours.ts SHARES_INFLIGHT_PREFILL). */
  sharePrefill?: boolean;
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
  /** Choices asked for, counted as requests arrive: a request's n where the flavour honours n, else 1. */
  samples: number;
  completed: number;
  faults: { drop: number; hang: number; error: number; garbage: number; slow: number };
  promptTokens: number;
  /** Prompt tokens actually evaluated (the uncached part). */
  prefillTokens: number;
  cachedTokens: number;
  cacheHits: number;
  cacheMisses: number;
  /** Prefills a request did not run because it waited for another request's prefill of its prompt. */
  sharedPrefills: number;
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

function emptyStats(): EmulatorStats {
  return {
    requests: 0,
    samples: 0,
    completed: 0,
    faults: { drop: 0, hang: 0, error: 0, garbage: 0, slow: 0 },
    promptTokens: 0,
    prefillTokens: 0,
    cachedTokens: 0,
    cacheHits: 0,
    cacheMisses: 0,
    sharedPrefills: 0,
    completionTokens: 0,
    truncated: 0,
    maxRunning: 0,
    candidates: { reference: 0, mutant: 0, garbage: 0, truncate: 0, 'unknown-prompt': 0 },
  };
}

/** An emulator's settings with their defaults filled in (checked). */
function settle(options: EmulatorOptions) {
  const rates: TimingOptions = {
    prefillTps: options.prefillTps ?? 1500,
    decodeTps: options.decodeTps ?? 40,
    timeScale: options.timeScale ?? 1,
    cachePrompts: options.cachePrompts ?? 4,
    concurrency: options.concurrency ?? 1,
    sharePrefill: options.sharePrefill ?? SHARES_INFLIGHT_PREFILL[options.emulate],
  };
  if (!(rates.prefillTps > 0) || !(rates.decodeTps > 0))
    throw new Error('prefillTps and decodeTps must be positive');
  if (!(rates.timeScale >= 0)) throw new Error('timeScale must be >= 0');
  return {
    emulate: options.emulate,
    models: options.models && options.models.length > 0 ? options.models : ['vtnode-emulated-coder'],
    context: options.context ?? 32_768,
    script: options.script ?? 'mixed',
    rates,
  };
}

/** The fault settings and their seeded sequence, replaceable while the server runs. */
function faultState(input: FaultsInput) {
  let faults = parseWith(Faults, input, 'emulator faults');
  let sequence = rng(faults.seed);
  return {
    get current() {
      return faults;
    },
    set(next: FaultsInput, name: string) {
      faults = parseWith(Faults, next, name);
      sequence = rng(faults.seed);
    },
    draw: () => drawFault(faults, sequence.next()),
  };
}

/** Starts listening; resolves to the server's base URL and port. */
async function listen(server: ReturnType<typeof createServer>, port: number, host: string) {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${shown}:${address.port}`, port: address.port };
}

/**
 * Starts an OpenAI-compatible HTTP server that behaves like llama-server, Ollama or mlx_lm.server for
 * dry runs, drills, tests and benchmarks: no weights, scripted answers (script.ts), simulated
 * prefill/decode time and an LRU prompt cache (timing.ts), each flavour's own endpoints (flavours.ts),
 * the chat APIs (chat.ts), and injectable faults (faults.ts).
 */
export async function createEmulator(options: EmulatorOptions): Promise<Emulator> {
  const { emulate, models, context, script, rates } = settle(options);
  const tasks = await loadScriptedTasks(options.tasks ?? []);
  const timing = createTimingModel(rates);
  const faults = faultState(options.faults ?? {});
  let stats = emptyStats();
  let autoSeed = 0;
  const view: FlavourView & { loaded: Map<string, number> } = {
    models,
    concurrency: rates.concurrency,
    context,
    started: Date.now(),
    loaded: new Map(),
  };
  const sockets = new Set<Socket>();
  const chat: ChatContext = {
    kind: emulate,
    models,
    script,
    tasks,
    timing,
    rates,
    stats: () => stats,
    drawFault: () => faults.draw(),
    nextSeed: () => 0x5eed0000 + autoSeed++,
    markLoaded: (model) => view.loaded.set(model, Date.now()),
  };
  const reset = () => {
    timing.clearCache();
    stats = emptyStats();
  };
  const info = () => ({
    emulator: 'vtnode',
    emulate,
    version: `vtnode-${VTNODE_VERSION}-${VERSIONS[emulate]}`,
    models,
    concurrency: rates.concurrency,
    context,
    cachePrompts: rates.cachePrompts,
    sharePrefill: rates.sharePrefill,
    prefillTps: rates.prefillTps,
    decodeTps: rates.decodeTps,
    timeScale: rates.timeScale,
    script,
    tasks: tasks.size,
    faults: faults.current,
    cache: timing.cacheKeys(),
    stats,
  });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    flavourHeaders(emulate, res);
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (req.method === 'GET') {
      if (path === '/v1/models' || path === '/models') return sendJson(res, 200, modelList(emulate, view));
      if (path === EMULATOR_PATH) return sendJson(res, 200, info());
      if (!flavourGet(emulate, path, res, view)) notFound(emulate, res);
      return;
    }
    if (req.method === 'POST' && (path === '/v1/chat/completions' || path === '/chat/completions'))
      return handleChat(chat, req, res, 'openai');
    if (req.method === 'POST' && path === '/api/chat' && emulate === 'ollama')
      return handleChat(chat, req, res, 'ollama-native');
    if (req.method === 'POST' && path === `${EMULATOR_PATH}/faults`) {
      try {
        faults.set(JSON.parse(await readBody(req)), 'faults');
        return sendJson(res, 200, { faults: faults.current });
      } catch (err) {
        return sendError(res, 400, (err as Error).message);
      }
    }
    if (req.method === 'POST' && path === `${EMULATOR_PATH}/reset`) {
      reset();
      return sendJson(res, 200, { ok: true });
    }
    notFound(emulate, res);
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
  const { url, port } = await listen(server, options.port ?? 0, options.host ?? '127.0.0.1');
  log('emulating %s on %s (%d tasks)', emulate, url, tasks.size);

  return {
    url,
    port,
    setFaults: (f) => faults.set(f, 'faults'),
    stats: () => structuredClone(stats),
    reset,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
