import type { AdvertModel } from '../../protocol/advert.ts';
import {
  createModelAdapter,
  type GenerateRequest,
  type ModelAdapter,
  type ModelAdapterOptions,
  type SampleOutcome,
} from './adapter.ts';
import { ModelServerError } from './errors.ts';
import type { ProbedServer, ServerBehaviour } from './probe.ts';
import {
  createModelServerRegistry,
  type ModelServerRegistry,
  type ModelServerRegistryOptions,
  type ServerState,
} from './registry.ts';
import { createWarmSet, type WarmSet } from './warm.ts';

/** Adapter settings shared by every server of a node. */
export interface AdapterSettings {
  /** Requests accepted per server before new jobs are refused. */
  maxQueued?: number;
  /** Milliseconds one request may take. */
  requestTimeoutMs?: number;
  /** Extra attempts after connection errors, timeouts and 5xx. */
  retries?: number;
  /** First backoff, ms. */
  backoffMs?: number;
  /** Per server kind: force the use of `n` on (true) or off (false); default 'auto' (adapter.ts useN). */
  useN?: Partial<Record<ServerBehaviour, boolean | 'auto'>>;
  /** Bearer token for servers that want one. */
  apiKey?: string;
}

export interface ModelServiceOptions extends ModelServerRegistryOptions {
  /** Adapter settings. */
  adapter?: AdapterSettings;
  /** Entries kept in the warm set (default: what an advert carries). */
  warmCap?: number;
}

/** A node's model servers: the registry that finds them, one adapter per live server, the warm set. */
export interface ModelService {
  readonly registry: ModelServerRegistry;
  /** Observed-warm prompts of every server, newest first: the advert's `warm`. */
  readonly warm: WarmSet;
  /** The adapter of the least-loaded live server that serves `model`, or null. */
  adapterFor(model: string): ModelAdapter | null;
  /** k samples on a server that serves the model; throws ModelServerError when none does, QueueFullError when full. */
  generate(request: GenerateRequest): AsyncIterable<SampleOutcome>;
  /** Requests queued and running over all servers, and their total concurrency: the advert's `load`. */
  load(): { queued: number; running: number; capacity: number };
  /** Models served now (node/daemon.ts ModelSource). */
  models(): AdvertModel[];
  /** Calls `cb` when servers or models change (node/daemon.ts ModelSource). */
  onChange(cb: (states: ServerState[]) => void): () => void;
  /** Stops probing (node/daemon.ts ModelSource). */
  close(): Promise<void>;
}

export function createModelService(options: ModelServiceOptions = {}): ModelService {
  const registry = createModelServerRegistry(options);
  const warm = createWarmSet(options.warmCap);
  const settings = options.adapter ?? {};
  const adapters = new Map<string, { key: string; adapter: ModelAdapter }>();

  const adapterOf = (server: ProbedServer): ModelAdapter => {
    const key = `${server.behaviour}|${server.concurrency}`;
    const known = adapters.get(server.url);
    if (known?.key === key) return known.adapter;
    const opts: ModelAdapterOptions = {
      url: server.url,
      behaviour: server.behaviour,
      concurrency: server.concurrency,
      warm,
      useN: settings.useN?.[server.behaviour] ?? 'auto',
    };
    if (settings.maxQueued !== undefined) opts.maxQueued = settings.maxQueued;
    if (settings.requestTimeoutMs !== undefined) opts.requestTimeoutMs = settings.requestTimeoutMs;
    if (settings.retries !== undefined) opts.retries = settings.retries;
    if (settings.backoffMs !== undefined) opts.backoffMs = settings.backoffMs;
    if (settings.apiKey !== undefined) opts.apiKey = settings.apiKey;
    const adapter = createModelAdapter(opts);
    adapters.set(server.url, { key, adapter });
    return adapter;
  };

  const adapterFor = (model: string): ModelAdapter | null => {
    let best: { adapter: ModelAdapter; pressure: number } | null = null;
    for (const server of registry.servers()) {
      if (!server.models.some((m) => m.id === model)) continue;
      const adapter = adapterOf(server);
      const l = adapter.load();
      const pressure = (l.queued + l.running) / l.capacity;
      if (best === null || pressure < best.pressure) best = { adapter, pressure };
    }
    return best?.adapter ?? null;
  };

  // A server found down fails its running and queued requests at once (a hung one would hold its jobs
  // until the request timeout); it serves again once a probe finds it up.
  const unwatch = registry.onChange((states) => {
    for (const [url, { adapter }] of adapters) {
      const state = states.find((s) => s.url === url);
      adapter.setDown(
        state === undefined ? 'gone' : state.health === 'down' ? (state.error ?? 'down') : null,
      );
    }
  });

  return {
    registry,
    warm,
    adapterFor,
    generate(request) {
      const adapter = adapterFor(request.model);
      if (adapter === null) {
        const served = registry.models().map((m) => m.id);
        throw new ModelServerError(
          'model servers',
          `no live server serves model "${request.model}" (served: ${served.length > 0 ? served.join(', ') : 'none'})`,
          { retryable: true },
        );
      }
      return adapter.generate(request);
    },
    load() {
      const live = new Set(registry.servers().map((s) => s.url));
      let queued = 0;
      let running = 0;
      let capacity = 0;
      for (const [url, { adapter }] of adapters) {
        const l = adapter.load();
        queued += l.queued;
        running += l.running;
        if (live.has(url)) capacity += l.capacity;
      }
      for (const s of registry.servers()) if (!adapters.has(s.url)) capacity += s.concurrency;
      return { queued, running, capacity };
    },
    models: () => registry.models(),
    onChange: (cb) => registry.onChange(cb),
    close: () => {
      unwatch();
      return registry.close();
    },
  };
}
