/**
 * CPU time of child processes, read from /proc/self/stat (cutime + cstime: every descendant this
 * process has reaped, through the whole tree). Exact for unconfined commands (the fresh tsc baseline,
 * box copies), when the bench runs one thing at a time, which it does. Runs under bwrap do NOT show up
 * here (measured: a 2 s busy loop adds 0.02 s), so their CPU is taken from the sandbox's own sampled
 * usage instead (Linux only).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { CLOCK_TICKS } from '../../sandbox/procfs.ts';

/** CPU milliseconds (user + system) of every reaped descendant of this process so far. */
export async function childrenCpuMs(): Promise<number> {
  const text = await readFile('/proc/self/stat', 'utf8');
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); cutime and cstime are fields 16 and 17.
  const ticks = Number(rest[16 - 3]) + Number(rest[17 - 3]);
  return (ticks * 1000) / CLOCK_TICKS;
}

/** Runs `fn` and reports the wall time and the CPU time of the child processes it spawned and reaped. */
export async function withChildrenCpu<T>(
  fn: () => Promise<T>,
): Promise<{ value: T; cpuMs: number; wallMs: number }> {
  const cpu0 = await childrenCpuMs();
  const t0 = performance.now();
  const value = await fn();
  const wallMs = performance.now() - t0;
  return { value, cpuMs: (await childrenCpuMs()) - cpu0, wallMs };
}

/** What one unconfined command did. */
export interface CommandRun {
  argv: string[];
  exitCode: number | null;
  timedOut: boolean;
  cpuMs: number;
  wallMs: number;
}

/** Runs `argv` in `cwd` (output discarded), killed after `timeoutMs`; measures its CPU. */
export async function runMeasured(
  argv: string[],
  cwd: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<CommandRun> {
  let timedOut = false;
  const { value, cpuMs, wallMs } = await withChildrenCpu(
    () =>
      new Promise<number | null>((resolve, reject) => {
        const child = spawn(argv[0]!, argv.slice(1), { cwd, stdio: 'ignore', ...(signal ? { signal } : {}) });
        const timer = setTimeout(() => {
          timedOut = true;
          child.kill('SIGKILL');
        }, timeoutMs);
        child.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        child.on('close', (code) => {
          clearTimeout(timer);
          resolve(code);
        });
      }),
  );
  return { argv, exitCode: value, timedOut, cpuMs, wallMs };
}
