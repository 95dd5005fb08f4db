import { pidAlive } from '../../sandbox/pid.ts';
import type { DataDir } from '../data-dir.ts';

/** The daemon of a data dir is not running (no control file, or its process is gone). */
export class NoDaemonError extends Error {
  constructor(dataDir: string) {
    super(`no vtnode daemon is running for ${dataDir} (start it with \`vtnode start\`, or pass --data-dir)`);
    this.name = 'NoDaemonError';
  }
}

/**
 * The daemon's process is alive but did not answer this call (a loaded machine: a reset
 * connection, a full listen queue, a call timeout). Transient: ask again.
 */
export class DaemonBusyError extends Error {
  constructor(dataDir: string, cause: Error) {
    super(`the vtnode daemon of ${dataDir} is running but did not answer: ${cause.message}`, { cause });
    this.name = 'DaemonBusyError';
  }
}

export interface ControlClient {
  call<T = unknown>(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<T>;
  /** A streaming route's values (NDJSON lines) as they come; ends when the daemon ends the stream. */
  stream<T = unknown>(path: string, body: unknown, signal?: AbortSignal): AsyncGenerator<T>;
}

/** Default time a control call may take before it counts as unanswered. */
const CALL_TIMEOUT_MS = 30_000;

/** Connects to the running daemon of a data dir; throws NoDaemonError when there is none. */
export async function connectControl(dataDir: DataDir, signal?: AbortSignal): Promise<ControlClient> {
  const control = await dataDir.readControl();
  // Verify liveness: a stale control.json from a killed daemon must not look like a running one.
  if (!control || !pidAlive(control.pid)) throw new NoDaemonError(dataDir.root);
  const { port, token, pid } = control;

  /** What a failed request means: the caller gave up, the daemon is gone, or it is busy. */
  const failure = (err: Error, callSignal: AbortSignal | undefined): Error => {
    if (signal?.aborted || callSignal?.aborted) return err;
    // The process is the authority: a refused connection with the process alive is a daemon
    // between restarts or starved of CPU, not a missing one.
    if (!pidAlive(pid)) return new NoDaemonError(dataDir.root);
    return new DaemonBusyError(dataDir.root, err);
  };

  return {
    async call<T>(method: 'GET' | 'POST', path: string, body?: unknown, callSignal?: AbortSignal) {
      const signals = [AbortSignal.timeout(CALL_TIMEOUT_MS), ...[callSignal, signal].filter((s) => !!s)];
      let res: Response;
      let text: string;
      try {
        res = await fetch(`http://127.0.0.1:${port}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: body === undefined ? null : JSON.stringify(body),
          signal: AbortSignal.any(signals),
        });
        text = await res.text();
      } catch (err) {
        throw failure(err as Error, callSignal);
      }
      let value: T & { error?: string };
      try {
        value = JSON.parse(text) as T & { error?: string };
      } catch {
        value = {} as T & { error?: string };
      }
      if (!res.ok) throw new Error(`daemon: ${value.error ?? `HTTP ${res.status}`}`);
      return value;
    },
    async *stream<T>(path: string, body: unknown, callSignal?: AbortSignal) {
      const signals = [callSignal, signal].filter((s) => !!s);
      let res: Response;
      try {
        res = await fetch(`http://127.0.0.1:${port}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: signals.length > 0 ? AbortSignal.any(signals) : null,
        });
      } catch (err) {
        throw failure(err as Error, callSignal);
      }
      if (!res.ok || !res.body) {
        const text = await res.text().catch(() => '');
        let error: string | undefined;
        try {
          error = (JSON.parse(text) as { error?: string }).error;
        } catch {}
        throw new Error(`daemon: ${error ?? `HTTP ${res.status}`}`);
      }
      let buffered = '';
      const decoder = new TextDecoder();
      const reader = res.body.getReader();
      try {
        for (let read = await reader.read(); !read.done; read = await reader.read()) {
          buffered += decoder.decode(read.value, { stream: true });
          for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
            const line = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 1);
            if (line.trim() !== '') yield JSON.parse(line) as T;
          }
        }
      } catch (err) {
        throw failure(err as Error, callSignal);
      } finally {
        reader.releaseLock();
      }
    },
  };
}
