import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
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
import type { SampleBody } from '../../protocol/sample.ts';
import { digestTopic } from '../../protocol/topics.ts';
import { exitedAndRead, waitForOutput } from '../helpers/cli.ts';
import { logTextStream } from '../helpers/log-lines.ts';
import { type Checked, pollFor } from '../helpers/poll.ts';
import { sampleBody } from '../helpers/samples.ts';

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

/** Polls `check` (every 50 ms) until it returns a truthy value (bounded; `notYet(seen)` is reported on timeout). */
export function until<T>(check: () => Checked<T>, what: string, timeoutMs = 15_000): Promise<T> {
  return pollFor(check, { what, timeoutMs, pauseMs: 50 });
}

/** A temp dir removed by the returned cleanup. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** What a worker process (worker-proc.ts) is: its name, the namespace of its samples, whether it logs task rows. */
export interface WorkerProcPlan {
  /** Its name (a `tamper` worker's own task is named after it). */
  name: string;
  /** Namespace its samples are drawn from (default `name`). */
  namespace?: string;
  /** Each sample logged with its task row (`tamper`: a task of its own every fifth sample). */
  taskRows?: 'honest' | 'tamper';
}

/** The `i`-th sample body worker-proc.ts logs (a test plans the sample ids it waits for from these). */
export function workerProcBody(plan: WorkerProcPlan, i: number): SampleBody {
  const ns = plan.namespace ?? plan.name;
  const taskId = !plan.taskRows
    ? `${ns}-task-${i % 10}`
    : plan.taskRows === 'tamper' && i % 5 === 4
      ? `${plan.name}-own-task`
      : `${ns}-task-${i % 3}`;
  return sampleBody(taskId, i % 2 ? 'qwen' : 'llama', i, {
    reward: i % 4 === 0 ? 0 : 1,
    candidate: `// ${ns} ${i}\nexport const f = () => ${i};\n`,
  });
}

/** A worker process of test/collect/worker-proc.ts (a sample log, its digests gossiped and served). */
export interface WorkerProc {
  child: ChildProcess;
  /** Its output so far (stdout, and stderr as text). */
  output(): string;
  /** Waits until its output matches `pattern` (bounded: 60 s by default; fails early if it exits). */
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
    /** Serve the last sample's body only after SIGUSR2 (`release()`), see worker-proc.ts. */
    withholdLast?: boolean;
  },
): WorkerProc {
  const args = [opts.token, opts.logPath, opts.name, String(opts.total), String(opts.intervalMs)];
  if (opts.namespace) args.push(opts.namespace);
  const child = spawn(process.execPath, [join(import.meta.dirname, 'worker-proc.ts'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ...(opts.taskRows ? { VT_TASK_ROWS: opts.taskRows } : {}),
      ...(opts.withholdLast ? { VT_WITHHOLD_LAST: '1' } : {}),
    },
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
  const exited = exitedAndRead(child);
  return {
    child,
    output: () => out,
    waitFor: (pattern, timeoutMs = 60_000) =>
      waitForOutput(child, () => out, pattern, { timeoutMs, name: `worker ${opts.name}` }),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
