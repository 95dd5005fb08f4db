import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { fingerprint } from '../../protocol/canonical.ts';
import { EMULATOR_HEADER } from '../models/probe.ts';
import { sendError, sendJson } from './http.ts';

/** Server kinds the emulator imitates. */
export const EmulateKind = z.enum(['llama-server', 'vllm', 'ollama', 'mlx']);
export type EmulateKind = z.infer<typeof EmulateKind>;

/** The version each imitated server reports. */
export const VERSIONS: Record<EmulateKind, string> = {
  'llama-server': 'b6500-emulated',
  vllm: '0.11.0',
  ollama: '0.12.6',
  mlx: '0.28.0',
};

/**
 * What each server does with `n > 1` on /v1/chat/completions (docs/model-servers.md has the code):
 * `honour`: n choices from one prefill (llama-server since ggml-org/llama.cpp#17775, at most its slots;
 * vLLM); `ignore`: one choice, no error (Ollama's ChatCompletionRequest has no `n`; mlx_lm.server never
 * reads it).
 */
export const N_HANDLING: Record<EmulateKind, 'honour' | 'ignore'> = {
  'llama-server': 'honour',
  vllm: 'honour',
  ollama: 'ignore',
  mlx: 'ignore',
};

/**
 * Whether a request whose prompt is being prefilled by another request waits for that prefill rather
 * than evaluating it again: vLLM (v1 KVCacheManager.allocate_slots registers a request's full blocks in
 * the prefix cache when they are scheduled, before the forward pass). llama-server's slots each
 * evaluate their own prompt (its prompt cache holds finished prompts; only n's children share the
 * parent's prefill); Ollama and mlx_lm.server cache finished prompts only.
 */
export const SHARES_INFLIGHT_PREFILL: Record<EmulateKind, boolean> = {
  'llama-server': false,
  vllm: true,
  ollama: false,
  mlx: false,
};

/** What a flavour's own endpoints show. */
export interface FlavourView {
  /** Model ids served. */
  models: readonly string[];
  /** Slots (requests processed at once). */
  concurrency: number;
  /** Context length. */
  context: number;
  /** When the emulator started (ms since the epoch). */
  started: number;
  /** Ollama: model -> when it was last loaded (ms since the epoch). */
  loaded: ReadonlyMap<string, number>;
}

/** Sets the headers by which clients (and vtnode's probe) tell the servers apart. */
export function flavourHeaders(kind: EmulateKind, res: ServerResponse): void {
  res.setHeader(EMULATOR_HEADER, kind);
  if (kind === 'mlx') res.setHeader('server', 'BaseHTTP/0.6 Python/3.12.8');
  if (kind === 'llama-server') res.setHeader('server', 'llama.cpp');
  if (kind === 'vllm') res.setHeader('server', 'uvicorn');
}

/** A 404 the way each server words it. */
export function notFound(kind: EmulateKind, res: ServerResponse): void {
  if (kind === 'ollama') {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('404 page not found');
  } else if (kind === 'mlx') {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('Not Found');
  } else if (kind === 'vllm') {
    sendJson(res, 404, { detail: 'Not Found' }); // FastAPI's
  } else {
    sendError(res, 404, 'File Not Found', 'not_found_error');
  }
}

/** GET /v1/models (OpenAI-compatible, every flavour). */
export function modelList(kind: EmulateKind, view: FlavourView) {
  return {
    object: 'list',
    data: view.models.map((id) => ({
      id,
      object: 'model',
      created: Math.floor(view.started / 1000),
      owned_by: kind === 'ollama' ? 'library' : kind === 'llama-server' ? 'llamacpp' : kind,
      ...(kind === 'vllm' ? { root: id, max_model_len: view.context } : {}),
    })),
  };
}

/** llama-server's extras: /health and /props. Returns whether it answered. */
function llamaServerGet(path: string, res: ServerResponse, view: FlavourView): boolean {
  if (path === '/health') sendJson(res, 200, { status: 'ok' });
  else if (path === '/props')
    sendJson(res, 200, {
      default_generation_settings: {
        n_ctx: view.context,
        params: { n_predict: -1, temperature: 0.8, top_p: 0.95, seed: -1 },
      },
      total_slots: view.concurrency,
      model_path: `/models/${view.models[0]}.gguf`,
      chat_template: '',
      build_info: VERSIONS['llama-server'],
    });
  else return false;
  return true;
}

/** Ollama's extras: /, /api/version, /api/tags and /api/ps. Returns whether it answered. */
function ollamaGet(path: string, res: ServerResponse, view: FlavourView): boolean {
  const size = 18_556_700_761;
  if (path === '/') {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('Ollama is running');
  } else if (path === '/api/version') sendJson(res, 200, { version: VERSIONS.ollama });
  else if (path === '/api/tags')
    sendJson(res, 200, {
      models: view.models.map((name) => ({
        name,
        model: name,
        modified_at: new Date(view.started).toISOString(),
        size,
        digest: fingerprint(name).slice(7),
      })),
    });
  else if (path === '/api/ps')
    sendJson(res, 200, {
      models: [...view.loaded.keys()].map((name) => ({
        name,
        model: name,
        size: size + view.context * 98_304,
        digest: fingerprint(name).slice(7),
        details: {
          format: 'gguf',
          family: 'emulated',
          parameter_size: '30.5B',
          quantization_level: 'Q4_K_M',
        },
        expires_at: new Date(Date.now() + 300_000).toISOString(),
        size_vram: size + view.context * 98_304,
        context_length: view.context,
      })),
    });
  else return false;
  return true;
}

/** mlx_lm.server's extras: /health. Returns whether it answered. */
function mlxGet(path: string, res: ServerResponse): boolean {
  if (path !== '/health') return false;
  sendJson(res, 200, { status: 'ok' });
  return true;
}

/** vLLM's extras: /version and /health (an empty 200). Returns whether it answered. */
function vllmGet(path: string, res: ServerResponse): boolean {
  if (path === '/version') sendJson(res, 200, { version: VERSIONS.vllm });
  else if (path === '/health') {
    res.writeHead(200);
    res.end();
  } else return false;
  return true;
}

/** Answers a GET on one of the flavour's own endpoints; returns false when the path is not one. */
export function flavourGet(kind: EmulateKind, path: string, res: ServerResponse, view: FlavourView): boolean {
  switch (kind) {
    case 'llama-server':
      return llamaServerGet(path, res, view);
    case 'ollama':
      return ollamaGet(path, res, view);
    case 'mlx':
      return mlxGet(path, res);
    case 'vllm':
      return vllmGet(path, res);
  }
}
