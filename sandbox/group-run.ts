import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunResult } from './confinement.ts';
import { CLOCK_TICKS, PAGE_SIZE, type ProcInfo } from './procfs.ts';

/** How to start one process group and how to find the processes that belong to it. */
export interface GroupRunOptions {
  /** Program and arguments of the outermost process (bwrap, sandbox-exec or the command itself). */
  argv: string[];
  /** Complete environment of the outermost process. */
  env: Record<string, string>;
  /** Working directory of the outermost process. */
  cwd: string;
  /** Run as this uid/gid (root only); supplementary groups are dropped by the spawn. */
  uid?: number | undefined;
  gid?: number | undefined;
  /** Wall-clock limit, milliseconds. */
  wallMs: number;
  /** Combined stdout + stderr cap, bytes. */
  outputBytes: number;
  /** Aborts the run. */
  signal?: AbortSignal | undefined;
  /** Number of extra pipes after stdio (fd 3, 4, ...) whose text is handed to `onInfo`. */
  infoFds?: number;
  /** Receives the text of extra pipe `fd` once it closes. */
  onInfo?: (fd: number, text: string) => void;
  /**
   * The processes that belong to the run right now (for usage sampling and the survivor check), or
   * null where the platform cannot tell (then only the group is checked).
   */
  members?: (child: ChildProcess) => Promise<ProcInfo[] | null>;
  /** Sampling period for usage, milliseconds. */
  sampleMs?: number;
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // group already gone
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts `argv` as the leader of a new process group, captures capped output, and kills the whole group
 * on timeout, abort or output overflow. After the leader exits, waits briefly for the group (and the
 * backend's members) to vanish, kills whatever is left and reports it as survivors.
 */
export async function runGroup(opts: GroupRunOptions): Promise<RunResult> {
  const started = performance.now();
  const extra = opts.infoFds ?? 0;
  const child = spawn(opts.argv[0]!, opts.argv.slice(1), {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', ...Array.from({ length: extra }, () => 'pipe' as const)],
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  });
  let timedOut = false;
  let aborted = false;
  let outputCapped = false;
  let total = 0;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const take = (sink: Buffer[]) => (chunk: Buffer) => {
    if (outputCapped) return;
    const room = opts.outputBytes - total;
    if (chunk.length > room) {
      sink.push(chunk.subarray(0, Math.max(0, room)));
      total = opts.outputBytes;
      outputCapped = true;
      killGroup(child);
      return;
    }
    sink.push(chunk);
    total += chunk.length;
  };
  child.stdout?.on('data', take(out));
  child.stderr?.on('data', take(err));
  for (let fd = 3; fd < 3 + extra; fd++) {
    const stream = child.stdio[fd] as NodeJS.ReadableStream | null;
    if (!stream) continue;
    const parts: Buffer[] = [];
    stream.on('data', (c: Buffer) => {
      if (parts.reduce((n, p) => n + p.length, 0) < 65536) parts.push(c);
    });
    stream.on('end', () => opts.onInfo?.(fd, Buffer.concat(parts).toString('utf8')));
  }

  const usage = { cpuMs: 0, peakRssBytes: 0, peakProcesses: 0 };
  let sampling = true;
  let stopSampling = () => {};
  const stopped = new Promise<void>((r) => {
    stopSampling = r;
  });
  const sample = async () => {
    while (sampling && opts.members) {
      const procs = await opts.members(child).catch(() => null);
      if (procs && procs.length > 0) {
        const cpu = (procs.reduce((n, p) => n + p.cpuTicks, 0) * 1000) / CLOCK_TICKS;
        const rss = procs.reduce((n, p) => n + p.rssPages, 0) * PAGE_SIZE;
        usage.cpuMs = Math.max(usage.cpuMs, cpu);
        usage.peakRssBytes = Math.max(usage.peakRssBytes, rss);
        usage.peakProcesses = Math.max(usage.peakProcesses, procs.length);
      }
      await Promise.race([sleep(opts.sampleMs ?? 200), stopped]);
    }
  };
  const sampler = sample();

  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child);
  }, opts.wallMs);
  const onAbort = () => {
    aborted = true;
    killGroup(child);
  };
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });

  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
    (resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => resolve({ code, signal }));
    },
  ).finally(() => {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  });
  // The leader is gone: anything left in its group or among the backend's members is a survivor.
  killGroup(child);
  let survivors = 0;
  const deadline = performance.now() + 2000;
  for (;;) {
    const known = opts.members ? await opts.members(child).catch(() => null) : null;
    const members = known ?? [];
    // procfs tells live processes from zombies awaiting a reaper; a signal-0 probe cannot.
    const alive = known !== null ? members.length > 0 : child.pid !== undefined && groupAlive(child.pid);
    if (!alive) break;
    if (performance.now() > deadline) {
      survivors = Math.max(1, members.length);
      for (const p of members) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      break;
    }
    await sleep(50);
  }
  sampling = false;
  stopSampling();
  await sampler;
  // Streams close once every holder of the pipes is dead; do not wait on a stuck holder forever.
  await Promise.race([
    Promise.all(
      [child.stdout, child.stderr].map(
        (s) => new Promise<void>((r) => (s && !s.readableEnded ? s.once('close', () => r()) : r())),
      ),
    ),
    sleep(1000),
  ]);
  for (const s of child.stdio) (s as NodeJS.ReadableStream & { destroy?: () => void })?.destroy?.();
  return {
    exitCode: exit.code,
    signal: exit.signal,
    timedOut,
    aborted,
    outputCapped,
    stdout: Buffer.concat(out).toString('utf8'),
    stderr: Buffer.concat(err).toString('utf8'),
    survivors,
    usage: { wallMs: Math.round(performance.now() - started), ...usage },
  };
}
