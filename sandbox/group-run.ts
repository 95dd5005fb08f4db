import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ExceededLimit, ResourceUsage, RunResult, RunSpec } from './confinement.ts';
import type { Limits } from './limits.ts';
import { logger } from './log.ts';
import {
  type CpuWait,
  type HangPolicy,
  judgeOverrun,
  type OverrunVerdict,
  type ReferenceTime,
} from './overrun.ts';
import { CLOCK_TICKS, PAGE_SIZE, type ProcInfo } from './procfs.ts';
import { openReportPipe, type ReportPipe } from './report-pipe.ts';

const log = logger('vtnode:sandbox:group-run');

/** Watches one resource of a run: runGroup polls it at every sample and once more after the run. */
export interface RunMonitor {
  /** Joins the run's leader while it waits at its gate, before it runs anything (e.g. into a cgroup). */
  attach?(pid: number): Promise<void>;
  /** Exact CPU time of the run so far, dead processes included, milliseconds. */
  cpuMs?(): Promise<number>;
  /** The limit the run has exceeded so far, given its live processes (null where unknown). */
  exceeded?(members: ProcInfo[] | null): Promise<ExceededLimit | null>;
  /** Time the run has waited for a CPU so far (an upper bound), or null where this monitor cannot tell. */
  cpuWait?(): Promise<CpuWait | null>;
}

/** The hang rule of one run (sandbox/overrun.ts): its yardstick and constants. */
export interface HangRule {
  /** The reference's own time under the same tests. */
  reference: ReferenceTime;
  policy: HangPolicy;
}

/** The hang rule of a run: its limits' policy with its reference's time, when it has both. */
export function hangRule(spec: Pick<RunSpec, 'limits' | 'reference'>): HangRule | undefined {
  return spec.limits.hang && spec.reference
    ? { reference: spec.reference, policy: spec.limits.hang }
    : undefined;
}

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
  /**
   * The command drops to uid/gid itself (a staged bwrap run, reach.ts): it is started as the caller,
   * and uid/gid only own the report pipe.
   */
  switchesUser?: boolean;
  /** Wall-clock backstop, milliseconds. */
  wallMs: number;
  /** CPU budget of the whole run, milliseconds (exact from a monitor's `cpuMs`, else sampled). */
  cpuMs: number;
  /** Combined stdout + stderr cap, bytes. */
  outputBytes: number;
  /** Aborts the run. */
  signal?: AbortSignal | undefined;
  /** Number of extra pipes after stdio (fd 3, 4, ...) whose text is handed to `onInfo`. */
  infoFds?: number;
  /** Receives the text of extra pipe `fd` once it closes. */
  onInfo?: (fd: number, text: string) => void;
  /** A report pipe at this fd (after the info pipes), read whole up to `maxBytes` (RunResult.report). */
  report?: { fd: number; maxBytes: number } | undefined;
  /**
   * The processes that belong to the run right now (for usage sampling and the survivor check), or
   * null where the platform cannot tell (then only the group is checked).
   */
  members?: (child: ChildProcess) => Promise<ProcInfo[] | null>;
  /** Resource watches (the run's cgroup, its box's storage, sampled fallbacks). */
  monitors?: RunMonitor[];
  /** Sampling period for usage and monitors, milliseconds. */
  sampleMs?: number;
  /**
   * Ends a run as the candidate's timeout once it outlives its reference's yardstick with a CPU on offer,
   * and judges a run the backstop ends (`overrun`); absent: a run the backstop ends is not judged.
   */
  hang?: HangRule | undefined;
}

/**
 * The leader waits on its stdin until every monitor has attached it, then runs argv with stdin from
 * /dev/null: nothing of the run executes before it is accounted (no fork can slip out of a cgroup).
 * The scorer opens the gate by writing a line; if the scorer dies first, the read fails and it exits.
 * The shell exports PWD on its own; it is removed unless the run's environment has it, so the run's
 * environment stays exactly the one given.
 */
export function gatedArgv(argv: string[], env: Record<string, string>): string[] {
  const script = `read -r go || exit 125; ${'PWD' in env ? '' : 'unset PWD; '}exec "$@" </dev/null`;
  return ['/bin/sh', '-c', script, 'vtnode-gate', ...argv];
}

/** The uid/gid options of a spawn that runs as `opts.uid`/`opts.gid` (each when given). */
export function spawnOwner(opts: { uid?: number | undefined; gid?: number | undefined }): {
  uid?: number;
  gid?: number;
} {
  return {
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  };
}

/** Why the run was ended early; the first cause wins. */
type Stop =
  | { cause: 'wall' | 'cpu' | 'abort' | 'output' }
  | { cause: 'limit'; limit: ExceededLimit }
  | { cause: 'hang'; verdict: OverrunVerdict };

/** SIGKILLs the child's process group (gone already: nothing to do). */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // group already gone
  }
}

/** Whether any process of the group is left. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

const sum = (procs: ProcInfo[], f: (p: ProcInfo) => number) => procs.reduce((n, p) => n + f(p), 0);

/** CPU of live members plus what they reaped from dead children, milliseconds. */
function sampledCpuMs(procs: ProcInfo[]): number {
  return (sum(procs, (p) => p.cpuTicks + p.reapedCpuTicks) * 1000) / CLOCK_TICKS;
}

/**
 * Fallback where no cgroup accounts for the run: its memory (summed resident sets) and processes
 * (summed threads) from the sampled members. Bounds: what is allocated and freed between two samples
 * is unseen, and shared memory no process maps (a memfd held by a descriptor only) is not counted.
 */
export function sampledLimits(limits: Pick<Limits, 'memoryBytes' | 'processes'>): RunMonitor {
  return {
    async exceeded(members) {
      if (!members || members.length === 0) return null;
      if (sum(members, (p) => p.rssPages) * PAGE_SIZE > limits.memoryBytes) return 'memory';
      // RLIMIT_NPROC refuses the next fork once the threads reach the limit.
      if (sum(members, (p) => p.threads) >= limits.processes) return 'processes';
      return null;
    },
  };
}

/** Collects stdout and stderr up to `cap` bytes together; `onOverflow` runs once when it is passed. */
function captureOutput(child: ChildProcess, cap: number, onOverflow: () => void) {
  let total = 0;
  let capped = false;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const take = (sink: Buffer[]) => (chunk: Buffer) => {
    if (capped) return;
    const room = cap - total;
    if (chunk.length > room) {
      sink.push(chunk.subarray(0, Math.max(0, room)));
      total = cap;
      capped = true;
      onOverflow();
      return;
    }
    sink.push(chunk);
    total += chunk.length;
  };
  child.stdout?.on('data', take(out));
  child.stderr?.on('data', take(err));
  return { text: (which: 'out' | 'err') => Buffer.concat(which === 'out' ? out : err).toString('utf8') };
}

/** Hands the text of each extra pipe (fd 3, 4, ...) to `onInfo` when it closes (64 KiB at most). */
export function captureInfo(
  child: ChildProcess,
  count: number,
  onInfo?: (fd: number, text: string) => void,
): void {
  for (let fd = 3; fd < 3 + count; fd++) {
    const stream = child.stdio[fd] as NodeJS.ReadableStream | null;
    if (!stream) continue;
    const parts: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      if (size < 65536) parts.push(c);
      size += c.length;
    });
    stream.on('end', () => onInfo?.(fd, Buffer.concat(parts).toString('utf8')));
  }
}

/** Attaches the gated leader to every monitor, then lets it run; kills it if an attach fails. */
async function openGate(child: ChildProcess, monitors: RunMonitor[]): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      if (child.pid !== undefined) resolve();
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    for (const m of monitors) await m.attach?.(child.pid!);
    // A leader that died at its gate closes the pipe: that shows as its exit, not as a write error.
    child.stdin?.on('error', () => {});
    child.stdin?.end('go\n');
  } catch (err) {
    killGroup(child);
    throw new Error(`cannot start the run: ${(err as Error).message}`);
  }
}

/**
 * After the leader exited: waits (2 s at most) for its group and the backend's members to vanish, kills
 * whatever is left and returns how many processes survived.
 */
async function reapGroup(child: ChildProcess, members: GroupRunOptions['members']): Promise<number> {
  killGroup(child);
  const deadline = performance.now() + 2000;
  for (;;) {
    const known = members ? await members(child).catch(() => null) : null;
    const procs = known ?? [];
    // procfs tells live processes from zombies awaiting a reaper; a signal-0 probe cannot.
    const alive = known !== null ? procs.length > 0 : child.pid !== undefined && groupAlive(child.pid);
    if (!alive) return 0;
    if (performance.now() > deadline) {
      for (const p of procs) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      return Math.max(1, procs.length);
    }
    await sleep(50);
  }
}

/** Waits (1 s at most) for stdout, stderr and the report pipe to close, then destroys every pipe. */
async function closeStreams(child: ChildProcess, report: ReportPipe | null): Promise<void> {
  // Streams close once every holder of the pipes is dead; do not wait on a stuck holder forever.
  await Promise.race([
    Promise.all([
      report?.text,
      ...[child.stdout, child.stderr].map(
        (s) => new Promise<void>((r) => (s && !s.readableEnded ? s.once('close', () => r()) : r())),
      ),
    ]),
    sleep(1000),
  ]);
  report?.destroy();
  for (const s of child.stdio) (s as NodeJS.ReadableStream & { destroy?: () => void })?.destroy?.();
}

/** Periodic sampling of a run: usage, the CPU budget and every monitor; `stop` ends the run. */
function startSampler(
  child: ChildProcess,
  opts: GroupRunOptions,
  stop: (s: Stop) => void,
  started: number,
): {
  usage: Omit<ResourceUsage, 'wallMs'>;
  /** The last reading of the run's CPU wait (null where nothing tells). */
  waited(): CpuWait | null;
  finish(): Promise<ExceededLimit | null>;
} {
  const usage = { cpuMs: 0, peakRssBytes: 0, peakProcesses: 0 };
  const monitors = opts.monitors ?? [];
  const exact = monitors.find((m) => m.cpuMs)?.cpuMs;
  let waited: CpuWait | null = null;
  /** The run's wall time just before `waited` was read (the wait only grows: offered time is not overstated). */
  let waitedAt = 0;
  const readWait = async () => {
    for (const m of monitors) {
      const w = await m.cpuWait?.().catch(() => null);
      if (w) return w;
    }
    return null;
  };
  const poll = async (procs: ProcInfo[] | null): Promise<ExceededLimit | null> => {
    if (procs && procs.length > 0) {
      usage.peakRssBytes = Math.max(usage.peakRssBytes, sum(procs, (p) => p.rssPages) * PAGE_SIZE);
      usage.peakProcesses = Math.max(usage.peakProcesses, procs.length);
    }
    const cpu = exact ? await exact().catch(() => 0) : procs ? sampledCpuMs(procs) : 0;
    usage.cpuMs = Math.max(usage.cpuMs, cpu);
    if (opts.hang) {
      waitedAt = performance.now() - started;
      waited = await readWait();
    }
    for (const m of monitors) {
      const limit = await m.exceeded?.(procs).catch(() => null);
      if (limit) return limit;
    }
    return null;
  };
  let running = true;
  let wake = () => {};
  const loop = (async () => {
    while (running) {
      const procs = opts.members ? await opts.members(child).catch(() => null) : null;
      const limit = await poll(procs);
      const hang = opts.hang ? overrun(opts, opts.hang, waitedAt, usage.cpuMs, waited) : null;
      if (limit) stop({ cause: 'limit', limit });
      else if (usage.cpuMs > opts.cpuMs) stop({ cause: 'cpu' });
      else if (hang?.verdict === 'timeout') stop({ cause: 'hang', verdict: hang });
      await Promise.race([sleep(opts.sampleMs ?? 200), new Promise<void>((r) => (wake = r))]);
    }
  })();
  return {
    usage,
    waited: () => waited,
    async finish() {
      running = false;
      wake();
      await loop;
      // A last look once every process is gone: exact CPU, OOM kills and storage that a bomb reached
      // between two samples.
      return await poll([]);
    },
  };
}

/** The hang rule's verdict on a run that has used `wallMs` and `cpuMs` so far. */
function overrun(
  opts: GroupRunOptions,
  hang: HangRule,
  wallMs: number,
  cpuMs: number,
  waited: CpuWait | null,
): OverrunVerdict {
  return judgeOverrun({
    wallMs,
    cpuMs,
    waited,
    reference: hang.reference,
    backstopMs: opts.wallMs,
    policy: hang.policy,
  });
}

/**
 * Starts `argv` as the leader of a new process group (held at a gate until the monitors attach it),
 * captures capped output, samples usage, and kills the whole group on the wall-clock backstop, the CPU
 * budget, a monitor's exceeded limit, abort or output overflow. After the leader exits, waits briefly
 * for the group (and the backend's members) to vanish, kills whatever is left and reports survivors.
 */
export async function runGroup(opts: GroupRunOptions): Promise<RunResult> {
  const started = performance.now();
  const extra = opts.infoFds ?? 0;
  const reportFd = opts.report?.fd;
  if (reportFd !== undefined && reportFd < 3 + extra)
    throw new Error(`runGroup: the report fd ${reportFd} overlaps the info pipes (fd 3 to ${2 + extra})`);
  const gated = (opts.monitors ?? []).some((m) => m.attach);
  const argv = gated ? gatedArgv(opts.argv, opts.env) : opts.argv;
  const owner = opts.uid !== undefined ? { uid: opts.uid, gid: opts.gid ?? opts.uid } : undefined;
  const report = opts.report ? await openReportPipe(opts.report.maxBytes, owner) : null;
  // Info pipes, nothing between them and the report fd, then the report pipe's write end.
  const slots = Array.from({ length: (reportFd ?? 2 + extra) - 2 }, (_, i): 'pipe' | 'ignore' | number =>
    i < extra ? 'pipe' : i === (reportFd ?? 0) - 3 ? report!.writeFd : 'ignore',
  );
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: [gated ? 'pipe' : 'ignore', 'pipe', 'pipe', ...slots],
    ...(opts.switchesUser ? {} : spawnOwner(opts)),
  });
  // The child holds its copy now (or never will): only the run's processes may keep the pipe open.
  report?.closeWriteEnd();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  exited.catch(() => {});
  let stopped: Stop | null = null;
  const stop = (s: Stop) => {
    stopped ??= s;
    killGroup(child);
  };
  const output = captureOutput(child, opts.outputBytes, () => stop({ cause: 'output' }));
  captureInfo(child, extra, opts.onInfo);
  if (gated) await openGate(child, opts.monitors ?? []);
  const sampler = startSampler(child, opts, stop, started);
  let wallAt = 0;
  const timer = setTimeout(() => {
    wallAt = performance.now() - started;
    stop({ cause: 'wall' });
  }, opts.wallMs);
  const onAbort = () => stop({ cause: 'abort' });
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  let exit: { code: number | null; signal: NodeJS.Signals | null };
  try {
    exit = await exited;
  } catch (err) {
    await sampler.finish();
    throw err;
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
  const survivors = await reapGroup(child, opts.members);
  const lateLimit = await sampler.finish();
  await closeStreams(child, report);
  const s = stopped as Stop | null;
  const cpuExceeded = s?.cause === 'cpu' || sampler.usage.cpuMs > opts.cpuMs;
  const timedOut = (s?.cause === 'wall' || s?.cause === 'hang') && !cpuExceeded;
  // The backstop's stop is judged on the final readings (exact CPU, the wait up to the end).
  const judged =
    s?.cause === 'hang'
      ? s.verdict
      : timedOut && opts.hang
        ? overrun(opts, opts.hang, wallAt, sampler.usage.cpuMs, sampler.waited())
        : null;
  log(
    `ended: exit ${exit.code} signal ${exit.signal} stopped ${JSON.stringify(s)} late ${lateLimit} ` +
      `cpu ${(opts.monitors ?? []).some((m) => m.cpuMs) ? 'exact' : 'sampled'} ` +
      `usage ${JSON.stringify(sampler.usage)} cpu budget ${opts.cpuMs} ms, backstop ${opts.wallMs} ms`,
  );
  return {
    exitCode: exit.code,
    signal: exit.signal,
    timedOut,
    overrun: timedOut ? judged : null,
    cpuExceeded,
    limitExceeded: s?.cause === 'limit' ? s.limit : lateLimit,
    aborted: s?.cause === 'abort',
    outputCapped: s?.cause === 'output',
    stdout: output.text('out'),
    stderr: output.text('err'),
    survivors,
    usage: { wallMs: Math.round(performance.now() - started), ...sampler.usage },
    ...(report ? { report: await report.text } : {}),
  };
}
