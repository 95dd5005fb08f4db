import type { DataDir } from '../data-dir.ts';

/** The daemon of a data dir is not running (no control file, or nobody answers). */
export class NoDaemonError extends Error {
  constructor(dataDir: string) {
    super(`no vtnode daemon is running for ${dataDir} (start it with \`vtnode start\`, or pass --data-dir)`);
    this.name = 'NoDaemonError';
  }
}

export interface ControlClient {
  call<T = unknown>(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<T>;
}

/** Connects to the running daemon of a data dir; throws NoDaemonError when there is none. */
export async function connectControl(dataDir: DataDir, signal?: AbortSignal): Promise<ControlClient> {
  let control: Awaited<ReturnType<DataDir['readControl']>>;
  control = await dataDir.readControl();
  if (!control) throw new NoDaemonError(dataDir.root);
  const { port, token } = control;
  const client: ControlClient = {
    async call<T>(method: 'GET' | 'POST', path: string, body?: unknown, callSignal?: AbortSignal) {
      const signals = [callSignal ?? AbortSignal.timeout(30_000), ...(signal ? [signal] : [])];
      let res: Response;
      try {
        res = await fetch(`http://127.0.0.1:${port}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: body === undefined ? null : JSON.stringify(body),
          signal: AbortSignal.any(signals),
        });
      } catch (err) {
        if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') throw err;
        throw new NoDaemonError(dataDir.root);
      }
      const value = (await res.json().catch(() => ({}))) as T & { error?: string };
      if (!res.ok) throw new Error(`daemon: ${value.error ?? `HTTP ${res.status}`}`);
      return value;
    },
  };
  // Verify liveness: a stale control.json from a killed daemon must not look like a running one.
  try {
    process.kill(control.pid, 0);
  } catch {
    throw new NoDaemonError(dataDir.root);
  }
  return client;
}
