import type { AdvertModel } from '../../protocol/advert.ts';
import { logger } from '../logger.ts';
import { ModelServerError } from './errors.ts';
import { normaliseServerUrl, type ProbedServer, probeServer } from './probe.ts';
import { type ProbeHealth, type ProbeOutcome, probeHealthModel } from './probe-health.ts';

const log = logger('vtnode:models:registry');

/** Well-known ports of local OpenAI-compatible servers (8080: llama-server and mlx_lm.server). */
export const WELL_KNOWN_PORTS: readonly number[] = [11434, 8080, 1234, 8000];

/** The state of one configured or auto-detected server. */
export interface ServerState {
  /** Base URL. */
  url: string;
  /** True when the URL was given by the user (shown as down when unreachable); false when auto-detected. */
  configured: boolean;
  /** The last successful probe, or null while the server is down (a slow server keeps its last one). */
  server: ProbedServer | null;
  /** The last probe error, or null. */
  error: string | null;
  /** `up`, `slow` (its last probes timed out: still served), `down`, or `unknown` before any answer. */
  health: ProbeHealth['status'];
  /** When the server was last probed, ms since epoch. */
  probedAt: number;
}

export interface ModelServerRegistryOptions {
  /** Servers given by the user (`--model-server URL`). */
  urls?: string[];
  /** Also look for local servers on the well-known ports. Defaults to true when `urls` is empty. */
  autodetect?: boolean;
  /** Ports tried by auto-detection (default WELL_KNOWN_PORTS). */
  autodetectPorts?: readonly number[];
  /** Host tried by auto-detection (default 127.0.0.1). */
  autodetectHost?: string;
  /** Milliseconds between probes of every server (down ones included). */
  intervalMs?: number;
  /** Milliseconds each probe request may take at first; doubled after each timeout, up to maxTimeoutMs. */
  timeoutMs?: number;
  /** Longest a probe may take after timeouts, ms (default 30,000). */
  maxTimeoutMs?: number;
  /** Timeouts in a row after which a server counts as down (default 3). */
  maxTimeouts?: number;
  /** Stops re-probing when aborted. */
  signal?: AbortSignal;
  /** Concurrency per server URL where the server cannot say (e.g. Ollama started with OLLAMA_NUM_PARALLEL=4). */
  concurrency?: Record<string, number>;
  /** fetch implementation (tests). */
  fetch?: typeof fetch;
}

/** Emitted as `change` whenever the set of live servers or their models changes. */
export interface ModelServerRegistryEvents {
  change: CustomEvent<ServerState[]>;
}

export interface ModelServerRegistry extends EventTarget {
  /** Probes every server now; resolves when done (never rejects for a server error). */
  refresh(): Promise<void>;
  /** Every known server (configured ones even while down). */
  states(): ServerState[];
  /** Servers that answered their last probe. */
  servers(): ProbedServer[];
  /** Models of the live servers, for the advert. */
  models(): AdvertModel[];
  /** Calls `cb` on every change; returns the unsubscribe function (node/daemon.ts ModelSource). */
  onChange(cb: (states: ServerState[]) => void): () => void;
  /** Resolves once the first round of probes has finished. */
  readonly ready: Promise<void>;
  /** Stops re-probing. */
  stop(): void;
  /** Stops re-probing (node/daemon.ts ModelSource). */
  close(): Promise<void>;
}

/** Probes every URL in `candidates` and returns the ones that answer; never throws for a server that is down. */
export async function detectLocalServers(
  options: {
    ports?: readonly number[];
    host?: string;
    timeoutMs?: number;
    signal?: AbortSignal;
    fetch?: typeof fetch;
  } = {},
): Promise<ProbedServer[]> {
  const host = options.host ?? '127.0.0.1';
  const found = await Promise.all(
    (options.ports ?? WELL_KNOWN_PORTS).map(async (port) => {
      try {
        return await probeServer(`http://${host}:${port}`, {
          timeoutMs: options.timeoutMs ?? 1500,
          ...(options.signal ? { signal: options.signal } : {}),
          ...(options.fetch ? { fetch: options.fetch } : {}),
        });
      } catch (err) {
        log('nothing usable on %s:%d: %s', host, port, (err as Error).message);
        return null;
      }
    }),
  );
  return found.filter((s): s is ProbedServer => s !== null);
}

function fingerprintOf(states: ServerState[]): string {
  return JSON.stringify(states.map((s) => [s.url, s.server?.kind, s.server?.models, s.server?.concurrency]));
}

/** What a failed probe says about the server: no answer in time, or down. */
function outcomeOf(err: unknown): ProbeOutcome {
  return err instanceof ModelServerError && err.timedOut ? 'timeout' : 'down';
}

/**
 * Keeps the list of model servers current: probes the configured URLs (and, with `autodetect`, the
 * well-known local ports) now and every `intervalMs`, and emits `change` when a server comes up, goes
 * down, or its models change. A server that is down is probed again next round; nothing is fatal.
 * Slow is not down (node/models/probe-health.ts): a server whose probe times out keeps its models and
 * is probed again at once with twice the time; it goes down after `maxTimeouts` timeouts in a row,
 * or at once when it refuses or resets the connection or answers badly.
 */
export function createModelServerRegistry(options: ModelServerRegistryOptions = {}): ModelServerRegistry {
  const configured = (options.urls ?? []).map(normaliseServerUrl);
  const autodetect = options.autodetect ?? configured.length === 0;
  const host = options.autodetectHost ?? '127.0.0.1';
  const candidates = autodetect
    ? (options.autodetectPorts ?? WELL_KNOWN_PORTS)
        .map((p) => `http://${host}:${p}`)
        .filter((u) => !configured.includes(u))
    : [];
  const states = new Map<string, ServerState>();
  for (const url of configured)
    states.set(url, {
      url,
      configured: true,
      server: null,
      error: 'not probed yet',
      health: 'unknown',
      probedAt: 0,
    });
  const health = probeHealthModel({
    timeoutMs: options.timeoutMs ?? 3000,
    ...(options.maxTimeoutMs !== undefined ? { maxTimeoutMs: options.maxTimeoutMs } : {}),
    ...(options.maxTimeouts !== undefined ? { maxTimeouts: options.maxTimeouts } : {}),
  });
  const healths = new Map<string, ProbeHealth>();
  const overrides = new Map(
    Object.entries(options.concurrency ?? {}).map(([u, n]) => {
      if (!Number.isInteger(n) || n < 1)
        throw new RangeError(`concurrency for ${u} must be a positive integer, got ${n}`);
      return [normaliseServerUrl(u), n] as const;
    }),
  );
  const target = new EventTarget();
  const stopper = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stopper.signal]) : stopper.signal;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let last = fingerprintOf([...states.values()]);

  /** One probe of `url` with the time its health allows; the health after it, and the server or the error. */
  const probeOnce = async (url: string) => {
    const before = healths.get(url) ?? health.initial;
    try {
      const server = await probeServer(url, {
        timeoutMs: before.timeoutMs,
        signal,
        ...(overrides.has(url) ? { concurrency: overrides.get(url)! } : {}),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      });
      return { after: health.next(before, 'ok'), server, message: null };
    } catch (err) {
      return { after: health.next(before, outcomeOf(err)), server: null, message: (err as Error).message };
    }
  };

  const probeOne = async (url: string, isConfigured: boolean): Promise<void> => {
    for (;;) {
      const prev = states.get(url);
      const { after, server, message } = await probeOnce(url);
      if (signal.aborted) return;
      healths.set(url, after);
      const now = Date.now();
      if (server) {
        if (!prev?.server) log('%s is up (%s, %d models)', url, server.kind, server.models.length);
        states.set(url, { url, configured: isConfigured, server, error: null, health: 'up', probedAt: now });
        return;
      }
      if (health.serving(after)) {
        // Slow: it keeps its models while it is probed again with more time.
        if (prev?.health === 'up') log.warn(`model server ${message}: slow, still serving; probing again`);
        log('%s is slow (%s); probing again with %d ms', url, message, after.timeoutMs);
        states.set(url, { ...prev!, error: message, health: after.status, probedAt: now });
      } else if (!after.retryNow) {
        if (isConfigured) {
          if (prev?.server || prev?.error !== message)
            log.warn(`model server ${message}; probing again later`);
          states.set(url, {
            url,
            configured: true,
            server: null,
            error: message,
            health: 'down',
            probedAt: now,
          });
        } else if (prev) {
          log('auto-detected server %s went away: %s', url, message);
          states.delete(url);
        }
      }
      if (!after.retryNow) return;
    }
  };

  const refresh = (): Promise<void> => {
    if (running) return running;
    running = (async () => {
      await Promise.all([
        ...configured.map((u) => probeOne(u, true)),
        ...candidates.map((u) => probeOne(u, false)),
      ]);
      const now = fingerprintOf([...states.values()]);
      if (now !== last && !signal.aborted) {
        last = now;
        target.dispatchEvent(new CustomEvent('change', { detail: [...states.values()] }));
      }
    })().finally(() => {
      running = null;
    });
    return running;
  };

  const schedule = () => {
    if (signal.aborted) return;
    timer = setTimeout(() => {
      refresh().then(schedule, schedule);
    }, options.intervalMs ?? 10_000);
    timer.unref();
  };
  const ready = refresh();
  ready.then(schedule, schedule);
  signal.addEventListener('abort', () => {
    if (timer) clearTimeout(timer);
  });

  return Object.assign(target, {
    refresh,
    states: () => [...states.values()],
    servers: () => [...states.values()].flatMap((s) => (s.server ? [s.server] : [])),
    models: () => [...states.values()].flatMap((s) => s.server?.models ?? []),
    onChange(cb: (states: ServerState[]) => void) {
      const listener = (e: Event) => cb((e as CustomEvent<ServerState[]>).detail);
      target.addEventListener('change', listener);
      return () => target.removeEventListener('change', listener);
    },
    ready,
    stop: () => stopper.abort(),
    close: async () => {
      stopper.abort();
      await running;
    },
  });
}
