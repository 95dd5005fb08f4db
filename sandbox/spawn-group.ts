import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SpawnExit, SpawnedProcess } from './confinement.ts';
import { captureInfo, groupAlive, killGroup, spawnOwner } from './group-run.ts';
import { CLOCK_TICKS, PAGE_SIZE, type ProcInfo } from './procfs.ts';

/** How to start one long-lived process group and how to find the processes that belong to it. */
export interface SpawnGroupOptions {
  /** Program and arguments of the outermost process (bwrap, sandbox-exec or the command itself). */
  argv: string[];
  /** Complete environment of the outermost process. */
  env: Record<string, string>;
  /** Working directory of the outermost process. */
  cwd: string;
  /** Run as this uid/gid (root only). */
  uid?: number | undefined;
  gid?: number | undefined;
  /** The command drops to uid/gid itself (a staged bwrap service, reach.ts): it is started as the caller. */
  switchesUser?: boolean;
  /** Kills the process when aborted. */
  signal?: AbortSignal | undefined;
  /** Number of extra pipes after stdio (fd 3, 4, ...) whose text is handed to `onInfo`. */
  infoFds?: number;
  /** Receives the text of extra pipe `fd` once it closes. */
  onInfo?: (fd: number, text: string) => void;
  /** Every process that belongs to it now (a full scan), or null where the platform cannot tell. */
  members?: (child: ChildProcess) => Promise<ProcInfo[] | null>;
  /**
   * The leader and its descendants now, read cheaply (Linux: processTree); used for usage polls instead
   * of a full `members` scan.
   */
  tree?: (leaderPid: number) => Promise<ProcInfo[]>;
  /** How often usage is sampled for the peaks reported at exit, milliseconds. */
  sampleMs?: number;
  /** Runs once the process and its group are gone (returns a uid to its pool); errors are ignored. */
  onExit?: () => Promise<void>;
}

/**
 * Waits (at most 2 s) for the group and the backend's members to vanish after the leader exited; kills
 * what is left and returns how many survived.
 */
async function reapSurvivors(child: ChildProcess, members: SpawnGroupOptions['members']): Promise<number> {
  killGroup(child);
  const deadline = performance.now() + 2000;
  for (;;) {
    const known = members ? await members(child).catch(() => null) : null;
    const alive = known !== null ? known.length > 0 : child.pid !== undefined && groupAlive(child.pid);
    if (!alive) return 0;
    if (performance.now() > deadline) {
      for (const p of known ?? []) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      return Math.max(1, known?.length ?? 0);
    }
    await sleep(50);
  }
}

/** Samples the usage of a process group (its tree where readable, else its members) and keeps peaks. */
function usageTracker(child: ChildProcess, opts: SpawnGroupOptions) {
  const peak = { cpuMs: 0, peakRssBytes: 0, peakProcesses: 0 };
  const current = async (): Promise<ProcInfo[]> => {
    if (opts.tree && child.pid !== undefined) return opts.tree(child.pid);
    return (opts.members ? await opts.members(child).catch(() => null) : null) ?? [];
  };
  return {
    peak,
    async usage(): Promise<{ cpuMs: number; rssBytes: number }> {
      const procs = await current().catch(() => [] as ProcInfo[]);
      const cpuMs = (procs.reduce((n, p) => n + p.cpuTicks, 0) * 1000) / CLOCK_TICKS;
      const rssBytes = procs.reduce((n, p) => n + p.rssPages, 0) * PAGE_SIZE;
      peak.cpuMs = Math.max(peak.cpuMs, cpuMs);
      peak.peakRssBytes = Math.max(peak.peakRssBytes, rssBytes);
      peak.peakProcesses = Math.max(peak.peakProcesses, procs.length);
      return { cpuMs, rssBytes };
    },
  };
}

/**
 * Starts `argv` as the leader of a new process group with piped stdio, for a long-lived service. The
 * group is killed by `kill()` or the AbortSignal; once the leader exits, whatever is left of the group
 * (and of the backend's members) is killed and counted as survivors, and `onExit` runs.
 * Throws when the process cannot be started.
 */
export async function spawnGroup(opts: SpawnGroupOptions): Promise<SpawnedProcess> {
  const started = performance.now();
  const child = spawn(opts.argv[0]!, opts.argv.slice(1), {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe', ...Array.from({ length: opts.infoFds ?? 0 }, () => 'pipe' as const)],
    ...(opts.switchesUser ? {} : spawnOwner(opts)),
  });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  }).catch(async (err: Error) => {
    await opts.onExit?.().catch(() => {});
    throw new Error(`cannot start ${opts.argv[0]}: ${err.message}`);
  });
  captureInfo(child, opts.infoFds ?? 0, opts.onInfo);
  // A write to a dead service's stdin must not crash the caller: the exit is reported by `exited`.
  child.stdin?.on('error', () => {});
  let killed = false;
  const kill = () => {
    killed = true;
    killGroup(child);
  };
  const onAbort = () => kill();
  if (opts.signal?.aborted) kill();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  const tracker = usageTracker(child, opts);
  const stopSampling = new AbortController();
  const sampler = (async () => {
    while (!stopSampling.signal.aborted) {
      await tracker.usage().catch(() => {});
      await sleep(opts.sampleMs ?? 1000, undefined, { signal: stopSampling.signal }).catch(() => {});
    }
  })();
  const exited = (async (): Promise<SpawnExit> => {
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    opts.signal?.removeEventListener('abort', onAbort);
    const survivors = await reapSurvivors(child, opts.members);
    stopSampling.abort();
    await sampler;
    await opts.onExit?.().catch(() => {});
    for (const s of child.stdio.slice(3))
      (s as NodeJS.ReadableStream & { destroy?: () => void })?.destroy?.();
    return {
      exitCode: exit.code,
      signal: exit.signal,
      killed,
      survivors,
      usage: { wallMs: Math.round(performance.now() - started), ...tracker.peak },
    };
  })();
  return {
    stdin: child.stdin!,
    stdout: child.stdout!,
    stderr: child.stderr!,
    exited,
    usage: () => tracker.usage(),
    kill,
  };
}
