import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { sleep } from '../../node/async/sleep.ts';
import {
  createLogServer,
  createSampleServer,
  logBodies,
  logDigests,
  type Server,
} from '../../node/digests/servers.ts';
import { digestSigner } from '../../node/digests/signature.ts';
import { createHost, type Host } from '../../node/fleet/host.ts';
import { openSampleLog, type SampleLog } from '../../node/worker/sample-log.ts';
import { digestTopic } from '../../protocol/topics.ts';
import { logTextStream } from '../helpers/log-lines.ts';

export const FLEET = 'collect-test';

/** A real libp2p host on loopback with the fleet's digest topic (a fresh key unless given one). */
export async function testHost(psk: string, privateKey?: PrivateKey): Promise<Host> {
  return createHost({
    privateKey: privateKey ?? (await generateKeyPair('Ed25519')),
    psk,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    mdns: false,
    topics: [digestTopic(FLEET)],
  });
}

/** A worker's collection side: a host, and a sample log signed with the host's key. */
export interface TestWorker {
  host: Host;
  log: SampleLog;
}

/** A host and its sample log (`path`, default in memory) whose digests are signed with the host's key. */
export async function testWorker(psk: string, path = ':memory:'): Promise<TestWorker> {
  const key = await generateKeyPair('Ed25519');
  const host = await testHost(psk, key);
  const log = openSampleLog({ path, origin: host.peerId.toString(), signer: digestSigner(key) });
  return { host, log };
}

/** Serves a sample log as a worker does: /vtnode/sample/2 (its own rows) and /vtnode/log/2 (its own digests). */
export async function serveLog(host: Host, log: SampleLog): Promise<Server[]> {
  return [
    await createSampleServer({ host, source: logBodies(log) }),
    await createLogServer({ host, source: logDigests(log) }),
  ];
}

/** Dials b from a (bounded). */
export async function connect(a: Host, b: Host): Promise<void> {
  await a.dial(b.getMultiaddrs()[0]!, { signal: AbortSignal.timeout(5000) });
}

/** Polls `check` until it returns a non-null value (bounded). */
export async function until<T>(
  check: () => T | null | undefined | false,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** A temp dir removed by the returned cleanup. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** A worker process of test/collect/worker-proc.ts (a sample log, its digests gossiped and served). */
export interface WorkerProc {
  child: ChildProcess;
  /** Its output so far (stdout, and stderr as text). */
  output(): string;
  /** Waits until its output matches `pattern` (bounded; fails early if it exits). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Kills it with SIGKILL and waits for the exit. */
  kill(): Promise<void>;
}

/**
 * Starts test/collect/worker-proc.ts: joins the fleet of `token`, appends `total` samples of
 * `namespace` (default `name`) every `intervalMs`, gossips and serves them. Added to `procs`.
 */
export function workerProc(
  procs: ChildProcess[],
  opts: {
    token: string;
    logPath: string;
    name: string;
    total: number;
    intervalMs: number;
    namespace?: string;
    /** Log each sample with its task row and serve the rows (`tamper`: altered), see worker-proc.ts. */
    taskRows?: 'honest' | 'tamper';
  },
): WorkerProc {
  const args = [opts.token, opts.logPath, opts.name, String(opts.total), String(opts.intervalMs)];
  if (opts.namespace) args.push(opts.namespace);
  const child = spawn(process.execPath, [join(import.meta.dirname, 'worker-proc.ts'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(opts.taskRows ? { env: { ...process.env, VT_TASK_ROWS: opts.taskRows } } : {}),
  });
  procs.push(child);
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  const stderrText = logTextStream();
  child.stderr.on('data', (d) => {
    out += stderrText.push(d);
  });
  child.stderr.on('end', () => {
    out += stderrText.end();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    output: () => out,
    async waitFor(pattern, timeoutMs = 30_000) {
      const end = Date.now() + timeoutMs;
      while (!pattern.test(out)) {
        if (Date.now() > end)
          throw new Error(`worker ${opts.name}: timed out waiting for ${pattern}\n${out}`);
        if (child.exitCode !== null)
          throw new Error(`worker ${opts.name} exited (${child.exitCode}):\n${out}`);
        await sleep(50);
      }
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
