import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { fingerprint } from '../../protocol/canonical.ts';
import { EMULATOR_HEADER } from '../models/probe.ts';
import { sendError, sendJson } from './http.ts';

/** Server kinds the emulator imitates. */
export const EmulateKind = z.enum(['llama-server', 'ollama', 'mlx']);
export type EmulateKind = z.infer<typeof EmulateKind>;

/** The version each imitated server reports. */
export const VERSIONS: Record<EmulateKind, string> = {
  'llama-server': 'b6500-emulated',
  ollama: '0.12.6',
  mlx: '0.28.0',
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
}

/** A 404 the way each server words it. */
export function notFound(kind: EmulateKind, res: ServerResponse): void {
  if (kind === 'ollama') {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('404 page not found');
  } else if (kind === 'mlx') {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('Not Found');
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
      owned_by: kind === 'ollama' ? 'library' : kind === 'llama-server' ? 'llamacpp' : 'mlx',
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

/** Answers a GET on one of the flavour's own endpoints; returns false when the path is not one. */
export function flavourGet(kind: EmulateKind, path: string, res: ServerResponse, view: FlavourView): boolean {
  switch (kind) {
    case 'llama-server':
      return llamaServerGet(path, res, view);
    case 'ollama':
      return ollamaGet(path, res, view);
    case 'mlx':
      return mlxGet(path, res);
  }
}
