import { DEFAULT_HANG_POLICY, type HangPolicy } from './overrun.ts';

/** Resource limits for one confined run. */
export interface Limits {
  /**
   * Wall-clock backstop, milliseconds: ends a run that neither finishes nor spends its CPU budget (it
   * sleeps, waits, deadlocks, or is starved by a loaded host). Reported as `timedOut`; with a reference
   * (RunSpec.reference) and `hang`, judged as the candidate's timeout or the host's starvation.
   */
  wallMs: number;
  /**
   * The hang rule (sandbox/overrun.ts): a run with a reference is the candidate's timeout once it
   * outlives `factor` × the reference's time (at least `floorMs`, at most `backstopShare` of `wallMs`)
   * with a CPU on offer; only a starved host makes it an infrastructure error. Absent: no hang rule.
   */
  hang?: HangPolicy;
  /**
   * CPU budget of the whole run, milliseconds: user + system time of all its processes, dead ones
   * included. Spending it ends the run (`cpuExceeded`, the candidate's fault). Unlike wall time it does
   * not grow when the host is loaded.
   */
  cpuMs: number;
  /** Memory of the whole run (cgroup, no swap) and data segment of each process (RLIMIT_DATA), bytes. */
  memoryBytes: number;
  /** Processes and threads of the whole run (cgroup) and of the run's uid (RLIMIT_NPROC). */
  processes: number;
  /** Combined stdout + stderr bytes; more kills the run. */
  outputBytes: number;
  /** Largest file a process may write, bytes (RLIMIT_FSIZE). */
  fileSizeBytes: number;
  /** Bytes the run may add to its box (the box holds $HOME, $TMPDIR, /tmp and /dev/shm too). */
  diskBytes: number;
  /** Files, folders and links the run may add to its box. */
  inodes: number;
}

/** The limits of a long-lived process: only its rlimits apply (wall time, output and storage are its caller's). */
export type ProcessLimits = Pick<Limits, 'cpuMs' | 'memoryBytes' | 'processes' | 'fileSizeBytes'>;

/** Placeholder wall time, output and storage for a long-lived process's limits (only the rlimits are applied). */
export function asRunLimits(limits: ProcessLimits): Limits {
  return { ...limits, wallMs: 0, outputBytes: 0, diskBytes: 0, inodes: 0 };
}

export const DEFAULT_LIMITS: Limits = {
  wallMs: 180_000,
  cpuMs: 60_000,
  memoryBytes: 4 * 1024 ** 3,
  processes: 512,
  outputBytes: 4 * 1024 ** 2,
  fileSizeBytes: 64 * 1024 ** 2,
  diskBytes: 256 * 1024 ** 2,
  inodes: 20_000,
  hang: DEFAULT_HANG_POLICY,
};

/** How a task's time limit (measured as wall time when it was mined) becomes a run's limits. */
export interface TimePolicy {
  /** CPU budget per millisecond of the task's limit: 1 = one core busy for the whole limit. */
  cpuPerWallMs: number;
  /** Wall-clock backstop as a multiple of the task's limit (room for a loaded host). */
  wallFactor: number;
}

export const DEFAULT_TIME_POLICY: TimePolicy = { cpuPerWallMs: 1, wallFactor: 3 };

/**
 * Limits for a task whose time limit is `timeoutMs`: the CPU budget is what one core does in that time
 * (a test run's CPU hardly depends on load, so a loaded host does not spend it), and the wall-clock
 * limit becomes a backstop `wallFactor` times longer, for runs that wait instead of computing.
 */
export function limitsFor(
  timeoutMs: number,
  base: Limits = DEFAULT_LIMITS,
  policy: TimePolicy = DEFAULT_TIME_POLICY,
): Limits {
  return {
    ...base,
    cpuMs: Math.round(timeoutMs * policy.cpuPerWallMs),
    wallMs: Math.round(timeoutMs * policy.wallFactor),
  };
}

/**
 * RLIMIT_CPU of each process, seconds: no single process may outspend the whole run; one second more
 * than the run's budget so that the run-level check (which reports `cpuExceeded`) normally fires first.
 */
export function rlimitCpuSeconds(limits: Limits): number {
  return Math.ceil(limits.cpuMs / 1000) + 1;
}
