import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import type { RunMonitor } from './group-run.ts';
import type { CpuWait } from './overrun.ts';

/**
 * The "some" total of a PSI file (/proc/pressure/cpu, a cgroup v2 `cpu.pressure`), microseconds: time
 * at least one task waited for a CPU. Null when the text has no such line (PSI disabled reads fail).
 */
export function parsePressureSome(text: string): number | null {
  const m = /^some\b.*\btotal=(\d+)/m.exec(text);
  return m ? Number(m[1]) : null;
}

/** Microseconds of "some" CPU pressure in a PSI file, or null when it cannot be read. */
export async function readPressureSome(path: string): Promise<number | null> {
  const text = await readFile(path, 'utf8').catch(() => null);
  return text === null ? null : parsePressureSome(text);
}

/** Idle time of every CPU of the host together, milliseconds, and how many CPUs. */
function hostIdle(): { idleMs: number; count: number } {
  const list = cpus();
  return { idleMs: list.reduce((n, c) => n + c.times.idle, 0), count: list.length };
}

/**
 * Upper bound of a run's CPU wait over a window of `elapsedMs`, from the host's idle counters: a task
 * waits for a CPU only while none is idle, and with `count` CPUs idle for `idleMs` together, at least
 * one was idle for `idleMs / count` of the window.
 */
export function waitFromIdle(elapsedMs: number, idleMs: number, count: number): number {
  if (count <= 0) return elapsedMs;
  return Math.max(0, elapsedMs - idleMs / count);
}

/**
 * The host-wide watch of a run's CPU wait, for runs without a cgroup `cpu.pressure` of their own: the
 * host's /proc/pressure/cpu "some" since the run began (Linux with PSI), else the window minus the time
 * some CPU was idle (any platform Node reports CPU times on). Both are upper bounds of the run's wait.
 */
export function hostCpuWait(pressurePath = '/proc/pressure/cpu'): RunMonitor {
  // The baseline is taken now, as the run is about to start (one small procfs read).
  const at = performance.now();
  const psiUs = (() => {
    try {
      return parsePressureSome(readFileSync(pressurePath, 'utf8'));
    } catch {
      return null;
    }
  })();
  const idle = hostIdle();
  return {
    async cpuWait(): Promise<CpuWait | null> {
      if (psiUs !== null) {
        const now = await readPressureSome(pressurePath);
        if (now !== null) return { ms: Math.max(0, (now - psiUs) / 1000), source: 'host-psi' };
      }
      const later = hostIdle();
      if (later.count === 0 || later.count !== idle.count) return null;
      return {
        ms: waitFromIdle(performance.now() - at, later.idleMs - idle.idleMs, later.count),
        source: 'host-idle',
      };
    },
  };
}
