/** Resource limits for one confined run. */
export interface Limits {
  /** Wall-clock limit, milliseconds; the whole run is killed as a group when it expires. */
  wallMs: number;
  /** CPU time per process, seconds (RLIMIT_CPU). */
  cpuSeconds: number;
  /** Data segment per process, bytes (RLIMIT_DATA: heap and anonymous writable mappings). */
  memoryBytes: number;
  /** Processes and threads of the run's user (RLIMIT_NPROC). */
  processes: number;
  /** Combined stdout + stderr bytes; more kills the run. */
  outputBytes: number;
  /** Largest file a process may write, bytes (RLIMIT_FSIZE). */
  fileSizeBytes: number;
}

/** The limits of a long-lived process: wall time and output are its caller's business. */
export type ProcessLimits = Omit<Limits, 'wallMs' | 'outputBytes'>;

/** Placeholder wall time and output for a long-lived process's limits (only the rlimits are applied). */
export function asRunLimits(limits: ProcessLimits): Limits {
  return { ...limits, wallMs: 0, outputBytes: 0 };
}

export const DEFAULT_LIMITS: Limits = {
  wallMs: 60_000,
  cpuSeconds: 120,
  memoryBytes: 4 * 1024 ** 3,
  processes: 512,
  outputBytes: 4 * 1024 ** 2,
  fileSizeBytes: 64 * 1024 ** 2,
};

/** Limits with a task's wall time applied; CPU time follows the wall time (workers run in parallel). */
export function limitsFor(wallMs: number, base: Limits = DEFAULT_LIMITS): Limits {
  return { ...base, wallMs, cpuSeconds: Math.max(base.cpuSeconds, Math.ceil((wallMs / 1000) * 4)) };
}
