import { z } from 'zod';
import type { AdvertModel, ServerKind } from '../../protocol/advert.ts';
import { logger } from '../logger.ts';
import { ModelServerError } from './errors.ts';
import { getJson, type JsonResponse, parseBody } from './http.ts';

const log = logger('vtnode:models:probe');

/** Header every response of `vtnode model-server` carries (value: the emulated kind). */
export const EMULATOR_HEADER = 'x-vtnode-emulator';
/** Endpoint of `vtnode model-server` that describes the emulator and its statistics. */
export const EMULATOR_PATH = '/vtnode/emulator';

/** Kinds whose API behaviour the adapter distinguishes (the emulator speaks one of them). */
export type ServerBehaviour = Exclude<ServerKind, 'vtnode-emulator'>;

/** What probing one server found. */
export interface ProbedServer {
  /** Base URL (no trailing slash, no /v1). */
  url: string;
  /** Kind for adverts: `vtnode-emulator` for the emulator, else the detected kind. */
  kind: ServerKind;
  /** The API the server speaks (for the emulator: the kind it emulates). */
  behaviour: ServerBehaviour;
  /** Version string, when the server says. */
  version: string | null;
  /** Requests the server runs at once (llama-server total_slots, emulator setting, else a per-kind default). */
  concurrency: number;
  /** Models served, in the advert's shape. */
  models: AdvertModel[];
}

export interface ProbeOptions {
  /** Milliseconds each probe request may take. */
  timeoutMs?: number;
  /** Aborts probing. */
  signal?: AbortSignal;
  /** Overrides the detected concurrency. */
  concurrency?: number;
  /** fetch implementation (tests). */
  fetch?: typeof fetch;
}

/** Default concurrency by kind where the server does not say: Ollama's OLLAMA_NUM_PARALLEL default is 1. */
const DEFAULT_CONCURRENCY: Record<ServerBehaviour, number> = {
  ollama: 1,
  'llama-server': 1,
  'lm-studio': 1,
  vllm: 16,
  mlx: 1,
  openai: 1,
};

const ModelList = z.object({
  data: z.array(
    z.looseObject({
      id: z.string().min(1).max(256),
      /** vLLM */
      max_model_len: z.number().int().positive().optional(),
    }),
  ),
});

const OllamaVersion = z.object({ version: z.string().min(1) });
const OllamaPs = z.object({
  models: z
    .array(
      z.looseObject({
        name: z.string().min(1),
        model: z.string().min(1).optional(),
        size: z.number().int().min(0),
        size_vram: z.number().int().min(0).optional(),
        context_length: z.number().int().positive().optional(),
      }),
    )
    .nullable()
    .transform((m) => m ?? []),
});

const LlamaProps = z.looseObject({
  default_generation_settings: z.looseObject({
    n_ctx: z.number().int().positive().optional(),
    params: z.looseObject({ n_ctx: z.number().int().positive().optional() }).optional(),
  }),
  total_slots: z.number().int().min(1),
  n_ctx: z.number().int().positive().optional(),
  build_info: z.string().optional(),
});

const LmStudioModels = z.object({
  data: z.array(
    z.looseObject({
      id: z.string().min(1),
      state: z.string(),
      max_context_length: z.number().int().positive().optional(),
      loaded_context_length: z.number().int().positive().optional(),
    }),
  ),
});

const VllmVersion = z.object({ version: z.string().min(1) });
const Health = z.looseObject({ status: z.string() });

const EmulatorInfo = z.looseObject({
  emulator: z.literal('vtnode'),
  emulate: z.enum(['llama-server', 'vllm', 'ollama', 'mlx']),
  concurrency: z.number().int().min(1),
  context: z.number().int().positive(),
  version: z.string(),
});

function isObjectWith(body: unknown, key: string): boolean {
  return typeof body === 'object' && body !== null && key in body;
}

/** Normalises a user-given server URL: no trailing slash, no `/v1` suffix. */
export function normaliseServerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ModelServerError(raw, 'not a URL (expected e.g. http://127.0.0.1:11434)');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ModelServerError(raw, `unsupported scheme ${url.protocol} (expected http: or https:)`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '')}`;
}

/**
 * Probes one OpenAI-compatible server: lists its models (`/v1/models`, required) and detects its kind
 * from kind-specific endpoints: Ollama `/api/version` + `/api/ps`, llama-server `/props`, LM Studio
 * `/api/v0/models`, vLLM `/version`, mlx_lm.server (`/health` from Python's http.server), else `openai`.
 * Throws a ModelServerError naming the URL (and the field) when the server is down or answers badly;
 * `timedOut` when an endpoint did not answer within `timeoutMs` (node/models/probe-health.ts tells
 * slow from down).
 */
export async function probeServer(rawUrl: string, options: ProbeOptions = {}): Promise<ProbedServer> {
  const url = normaliseServerUrl(rawUrl);
  const http = { timeoutMs: options.timeoutMs ?? 3000, signal: options.signal, fetch: options.fetch };
  const models = await getJson(url, '/v1/models', http);
  if (!models.found)
    throw new ModelServerError(
      url,
      models.notJson
        ? 'GET /v1/models: response is not JSON (not an OpenAI-compatible server?)'
        : `GET /v1/models: HTTP ${models.status} (not an OpenAI-compatible server?)`,
    );
  const list = parseBody(ModelList, models.body, url, '/v1/models');

  // An endpoint that fails tells which kind the server is not; one that times out tells nothing (a busy
  // server answers late): the probe as a whole timed out, rather than misreading the kind.
  const optional = async (path: string): Promise<JsonResponse> => {
    try {
      return await getJson(url, path, http);
    } catch (err) {
      if (options.signal?.aborted || (err instanceof ModelServerError && err.timedOut)) throw err;
      log('%s: %s', url, (err as Error).message);
      return { found: false, status: 0 };
    }
  };
  const [emu, ollama, props, lms, vllm, health] = await Promise.all([
    optional(EMULATOR_PATH),
    optional('/api/version'),
    optional('/props'),
    optional('/api/v0/models'),
    optional('/version'),
    optional('/health'),
  ]);

  let emulator: z.infer<typeof EmulatorInfo> | null = null;
  if (emu.found && emu.headers.get(EMULATOR_HEADER))
    emulator = parseBody(EmulatorInfo, emu.body, url, EMULATOR_PATH);

  let behaviour: ServerBehaviour = 'openai';
  let version: string | null = null;
  let concurrency: number | null = null;
  let serverContext: number | null = null;
  const perModel = new Map<string, { context: number | null; loaded: boolean; memoryBytes: number | null }>();
  let loadedByDefault = false;

  if (ollama.found && isObjectWith(ollama.body, 'version')) {
    behaviour = 'ollama';
    version = parseBody(OllamaVersion, ollama.body, url, '/api/version').version;
    const ps = await getJson(url, '/api/ps', http);
    if (!ps.found)
      throw new ModelServerError(url, `GET /api/ps: HTTP ${ps.status} (Ollama without /api/ps?)`);
    for (const m of parseBody(OllamaPs, ps.body, url, '/api/ps').models) {
      const info = { context: m.context_length ?? null, loaded: true, memoryBytes: m.size };
      perModel.set(m.name, info);
      if (m.model) perModel.set(m.model, info);
    }
  } else if (
    props.found &&
    (isObjectWith(props.body, 'default_generation_settings') || isObjectWith(props.body, 'total_slots'))
  ) {
    behaviour = 'llama-server';
    const p = parseBody(LlamaProps, props.body, url, '/props');
    concurrency = p.total_slots;
    serverContext =
      p.default_generation_settings.n_ctx ?? p.default_generation_settings.params?.n_ctx ?? p.n_ctx ?? null;
    version = p.build_info ?? null;
    loadedByDefault = true;
  } else if (lms.found && isObjectWith(lms.body, 'data')) {
    behaviour = 'lm-studio';
    for (const m of parseBody(LmStudioModels, lms.body, url, '/api/v0/models').data)
      perModel.set(m.id, {
        context: m.loaded_context_length ?? m.max_context_length ?? null,
        loaded: m.state === 'loaded',
        memoryBytes: null,
      });
  } else if (vllm.found && isObjectWith(vllm.body, 'version')) {
    behaviour = 'vllm';
    version = parseBody(VllmVersion, vllm.body, url, '/version').version;
    loadedByDefault = true;
  } else if (health.found && /python|basehttp/i.test(health.headers.get('server') ?? '')) {
    parseBody(Health, health.body, url, '/health');
    behaviour = 'mlx';
  }

  if (emulator) {
    concurrency = emulator.concurrency;
    version = emulator.version;
    if (emulator.emulate !== behaviour)
      log.warn(
        `${url}: emulator says it emulates ${emulator.emulate} but its endpoints look like ${behaviour}`,
      );
  }
  const conc = options.concurrency ?? concurrency ?? DEFAULT_CONCURRENCY[behaviour];
  const advertModels: AdvertModel[] = list.data.map((m) => {
    const info = perModel.get(m.id);
    return {
      id: m.id,
      server: emulator ? 'vtnode-emulator' : behaviour,
      context: info?.context ?? m.max_model_len ?? serverContext ?? emulator?.context ?? null,
      concurrency: Math.max(1, Math.min(1024, conc)),
      loaded: info?.loaded ?? loadedByDefault,
      memoryBytes: info?.memoryBytes ?? null,
    };
  });
  return {
    url,
    kind: emulator ? 'vtnode-emulator' : behaviour,
    behaviour,
    version,
    concurrency: Math.max(1, conc),
    models: advertModels,
  };
}
