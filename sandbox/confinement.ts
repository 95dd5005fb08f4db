import type { Readable, Writable } from 'node:stream';
import type { Limits, ProcessLimits } from './limits.ts';
import type { OverrunVerdict, ReferenceTime } from './overrun.ts';

/** Name of a confinement backend. */
export type BackendName = 'bwrap' | 'seatbelt' | 'unconfined';

/** One command to run confined. */
export interface RunSpec {
  /** Program and arguments; argv[0] is an absolute path or a name found on `env.PATH`. */
  argv: string[];
  /** Working directory (inside the box or a read-only path). */
  cwd: string;
  /** The box: the only writable directory. */
  box: string;
  /** Extra directories the run may read (the workspace, node_modules, the toolchain, ...). */
  readOnlyPaths: string[];
  /** Files inside the box the run may read but never write, replace or remove (judged tests, harness). */
  protectedPaths?: string[];
  /** The complete environment of the command: nothing else is inherited. */
  env: Record<string, string>;
  /** Resource limits. */
  limits: Limits;
  /**
   * The reference's own time under the same tests: with `limits.hang`, the yardstick that makes a run
   * which outlives it with a CPU on offer the candidate's timeout (sandbox/overrun.ts). Absent: the
   * wall-clock backstop alone, and a run it ends is not judged.
   */
  reference?: ReferenceTime | undefined;
  /** Aborts the run: the whole group is killed. */
  signal?: AbortSignal;
  /**
   * The command's fd REPORT_FD is a pipe the host reads as it is written (at most `maxBytes`): the
   * runner's report leaves the box without ever being a file a process of the box could replace.
   */
  reportPipe?: { maxBytes: number };
}

/** The fd of a run's command that is the report pipe (RunSpec.reportPipe). */
export const REPORT_FD = 4;

/** What came through a run's report pipe. */
export interface PipedReport {
  /** The text written (UTF-8), at most the cap. */
  text: string;
  /** More than the cap was written (the text is cut). */
  overflow: boolean;
}

/** A resource limit of the whole run that it went over (the run is then killed). */
export type ExceededLimit = 'memory' | 'disk' | 'inodes' | 'processes';

/** Resource usage of a run, sampled from the processes of the run while it lived. */
export interface ResourceUsage {
  /** Wall-clock duration, milliseconds. */
  wallMs: number;
  /**
   * CPU time (user + system) of the run, milliseconds: exact from its cgroup (dead processes included)
   * where there is one, else the highest sampled sum over its processes and what they reaped.
   */
  cpuMs: number;
  /** Highest observed resident memory summed over the run's processes, bytes. */
  peakRssBytes: number;
  /** Most processes observed at once. */
  peakProcesses: number;
}

/** What happened to one run. */
export interface RunResult {
  /** Exit code of the command, or null when it died of a signal or was killed. */
  exitCode: number | null;
  /** Signal that ended the command, if any. */
  signal: string | null;
  /**
   * True when the hang rule or the wall-clock backstop ended the run and its CPU budget was not spent:
   * the run waited, looped or was starved by load. Whose fault it is says `overrun`.
   */
  timedOut: boolean;
  /**
   * The hang rule's verdict on a timed-out run with a reference (`timeout`: the candidate's, reward 0;
   * `starved`: the host's, infrastructure); null (or absent) when not timed out or not judged.
   */
  overrun?: OverrunVerdict | null;
  /** True when the run spent more than its CPU budget (it was killed for it): the candidate's fault. */
  cpuExceeded: boolean;
  /**
   * The whole-run limit the run went over, where the platform can tell (see docs/sandbox.md): memory
   * (an OOM kill in its cgroup, or sampled resident memory), disk or inodes (its box), processes (a fork
   * refused by its cgroup, or sampled threads). The run is killed when it is seen. Null otherwise.
   */
  limitExceeded: ExceededLimit | null;
  /** True when the AbortSignal killed the run. */
  aborted: boolean;
  /** True when the output cap killed the run. */
  outputCapped: boolean;
  /** Captured stdout (at most the output cap), UTF-8. */
  stdout: string;
  /** Captured stderr (at most the output cap), UTF-8. */
  stderr: string;
  /** Processes of the run still alive after it ended (then killed); must be 0. */
  survivors: number;
  usage: ResourceUsage;
  /** What came through the report pipe, when the spec asked for one. */
  report?: PipedReport;
  /**
   * Why the sandbox could not set the run up, so its command never ran (bwrap's own error): a failure
   * of the host, never of the candidate. Null (or absent) when the command ran.
   */
  setupFailed?: string | null;
}

/** A long-lived process to start confined (a service that talks over its stdio). */
export interface SpawnSpec {
  /** Program and arguments; argv[0] is an absolute path or a name found on `env.PATH`. */
  argv: string[];
  /** Working directory (a read-only path). */
  cwd: string;
  /** Directories the process may read. Nothing is writable but a private /tmp (Linux). */
  readOnlyPaths: string[];
  /** The complete environment of the process: nothing else is inherited. */
  env: Record<string, string>;
  /** Resource limits for the process's whole life (CPU seconds add up over every request it serves). */
  limits: ProcessLimits;
  /** Aborts: the process and everything it started are killed. */
  signal?: AbortSignal;
}

/** How a spawned process ended. */
export interface SpawnExit {
  /** Exit code, or null when it died of a signal. */
  exitCode: number | null;
  /** Signal that ended it, if any. */
  signal: string | null;
  /** True when `kill()` or the AbortSignal ended it. */
  killed: boolean;
  /** Processes it started that were still alive after it ended (then killed); must be 0. */
  survivors: number;
  /** Usage sampled over its life. */
  usage: ResourceUsage;
}

/** A running confined process. */
export interface SpawnedProcess {
  /** Its stdin (closing it is how a service is asked to stop). */
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Resolves once the process and everything it started are gone; never rejects. */
  readonly exited: Promise<SpawnExit>;
  /** CPU time (user + system, milliseconds) and resident memory (bytes) of its processes now. */
  usage(): Promise<{ cpuMs: number; rssBytes: number }>;
  /** Kills it and everything it started. Idempotent. */
  kill(): void;
}

/** Result of a backend's startup self-test. */
export interface SelfTestResult {
  ok: boolean;
  /** One line per canary: what was tried and whether it was refused. */
  checks: { name: string; ok: boolean; detail: string }[];
}

/** A confinement backend: runs commands so that only the box is writable and nothing leaves. */
export interface Confinement {
  readonly name: BackendName;
  /** Stable description (backend, version, limits policy) that goes into evaluation fingerprints. */
  describe(): Record<string, unknown>;
  /** Runs one command confined. Never throws for what the command does; throws if it cannot start. */
  run(spec: RunSpec): Promise<RunResult>;
  /** Starts one long-lived process confined; throws if it cannot start. */
  spawn(spec: SpawnSpec): Promise<SpawnedProcess>;
  /** Canaries: a network connect, a write outside the box and a read of a planted secret must fail. */
  selfTest(signal?: AbortSignal): Promise<SelfTestResult>;
}

/** The backend is missing or unusable on this host. */
export class BackendUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackendUnavailableError';
  }
}
