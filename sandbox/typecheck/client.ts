// The client of the type-check service (service.mjs): one long-lived confined process per (workspace,
// tsconfig, TypeScript version), started lazily, restarted when it dies, one request at a time, each
// bounded by a CPU budget with a wall-clock backstop. Running out of either kills the process and
// answers `timeout`; a crash, a refused request or a broken protocol answers `error`. Neither is ever
// `failed`: only a diagnostic list from a completed check is.
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Confinement, SpawnExit, SpawnedProcess } from '../confinement.ts';
import type { ProcessLimits } from '../limits.ts';
import { type Logger, logger } from '../log.ts';
import type { ExportedApi } from './api.ts';
import { type LineReader, readLines } from './lines.ts';
import { SERVICE_ENTRY, serviceReadOnlyPaths, tsconfigDir } from './paths.ts';
import { type ReadyLine, type ServiceLine, ServiceLineSchema, type TypecheckDiagnostic } from './protocol.ts';
import { type ResolvedTypescript, resolveTypescript } from './resolve-typescript.mjs';

export interface TypecheckServiceOptions {
  /** The confinement backend the service process runs under. */
  confinement: Confinement;
  /** The workspace (a built checkout), read in place and read-only; overlay paths are relative to it. */
  workspaceDir: string;
  /** What follows `tsc` in the judge's type-check command, e.g. `['--noEmit', '-p', 'tsconfig.json']`. */
  tscArgs: string[];
  /** CPU budget of one check, milliseconds (default 30 s). */
  checkCpuMs?: number;
  /** CPU budget of the start: parsing, the base program and its full check, milliseconds (default 600 s). */
  startCpuMs?: number;
  /** Wall-clock backstop = budget × this factor + wallFloorMs (default 4): catches what CPU sampling cannot. */
  wallFactor?: number;
  /** See wallFactor (default 10 s). */
  wallFloorMs?: number;
  /** How often the CPU of a running check is sampled, milliseconds (default 100). */
  pollMs?: number;
  /** rlimits of the process for its whole life (defaults: 3600 CPU s, 4 GiB, 512 processes, 1 MiB files). */
  limits?: Partial<ProcessLimits>;
  /** Extra read-only paths (e.g. a monorepo root holding the tsconfig's `extends`). */
  readOnlyPaths?: string[];
  /** The node binary (default: this process's). */
  node?: string;
  /**
   * Flags for that node (default: a 64 MiB young generation, which cuts the garbage collection that
   * dominates large checks: 10.3 → 6.0 s CPU on remeda's largest case).
   */
  nodeFlags?: string[];
  /** Where the service's life is logged (default: the sandbox's `vtnode:sandbox:typecheck` logger). */
  log?: Logger;
}

/** The verdict of one check. */
export interface TypecheckResult {
  /** `passed`/`failed`: what `tsc` would say. `timeout`/`error`: no verdict (never a reward). */
  status: 'passed' | 'failed' | 'timeout' | 'error';
  /** At most 500 diagnostics (diagnosticCount has them all). */
  diagnostics: TypecheckDiagnostic[];
  diagnosticCount: number;
  /** The target's exported API (null without a target or without a verdict). */
  api: ExportedApi | null;
  /** CPU the check took: the service's own measure, or the sampled one for a timeout. */
  cpuMs: number;
  /** Why there is no verdict (`timeout`, `error`), else null. */
  error: string | null;
  /**
   * Which bound a `timeout` hit: `cpu` (the check itself used the budget: load does not change that, so
   * a caller may hold it against the candidate) or `wall` (the backstop: possibly a loaded machine).
   */
  limit: 'cpu' | 'wall' | null;
  /** The TypeScript version that checked (null when the service did not start). */
  typescript: string | null;
  /** Whether only the files the overlay can affect were checked, or all (null without a verdict). */
  scope: 'affected' | 'all' | null;
  /** How many files were checked on the new program (the others kept the base's diagnostics). */
  checkedFiles: number | null;
}

export interface CheckOptions {
  /** Workspace-relative file whose exported API is returned. */
  target?: string;
  /** Ends the wait (the promise rejects with the signal's reason); a started check still completes. */
  signal?: AbortSignal;
}

export interface TypecheckService {
  /** The TypeScript the service runs. */
  readonly typescript: ResolvedTypescript;
  /** Checks the workspace with `overlay` (workspace-relative path → text) written over it. */
  check(overlay: Record<string, string>, options?: CheckOptions): Promise<TypecheckResult>;
  /** Stops the process; later checks answer `error`. */
  close(): Promise<void>;
}

const DEFAULT_LIMITS: ProcessLimits = {
  cpuMs: 3_600_000,
  memoryBytes: 4 * 1024 ** 3,
  processes: 512,
  fileSizeBytes: 1024 ** 2,
};
/** Longest answer line accepted (a full API of a large barrel plus 500 diagnostics fit easily). */
const MAX_LINE_CHARS = 64 * 1024 * 1024;
const STDERR_TAIL = 4000;

interface Running {
  proc: SpawnedProcess;
  lines: LineReader;
  ready: ReadyLine | null;
  exit: SpawnExit | null;
  stderr: { text: string };
}

interface Budget {
  cpuMs: number;
  wallMs: number;
}

type Outcome =
  | { kind: 'line'; line: ServiceLine }
  | { kind: 'timeout'; limit: 'cpu' | 'wall'; cpuMs: number; why: string }
  | { kind: 'exited'; exit: SpawnExit }
  | { kind: 'broken'; why: string };

function noVerdict(
  status: 'timeout' | 'error',
  error: string,
  extra: Partial<TypecheckResult> = {},
): TypecheckResult {
  return {
    status,
    diagnostics: [],
    diagnosticCount: 0,
    api: null,
    cpuMs: 0,
    error,
    limit: null,
    typescript: null,
    scope: null,
    checkedFiles: null,
    ...extra,
  };
}

function describeExit(exit: SpawnExit): string {
  return exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.exitCode}`;
}

/** Parses one stdout line of the service; null with the reason when it is not a protocol line. */
function parseLine(text: string): { line: ServiceLine } | { why: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { why: `the service wrote a line that is not JSON: ${text.slice(0, 200)}` };
  }
  const parsed = ServiceLineSchema.safeParse(raw);
  if (!parsed.success)
    return { why: `the service wrote an invalid line: ${parsed.error.message.slice(0, 500)}` };
  return { line: parsed.data };
}

/** Creates the service for one workspace and tsconfig; the process starts at the first check. */
export function createTypecheckService(options: TypecheckServiceOptions): TypecheckService {
  const log = options.log ?? logger('vtnode:sandbox:typecheck');
  const node = options.node ?? process.execPath;
  const configDir = tsconfigDir(options.workspaceDir, options.tscArgs);
  const typescript = resolveTypescript(configDir);
  const wall = (cpuMs: number) => cpuMs * (options.wallFactor ?? 4) + (options.wallFloorMs ?? 10_000);
  const checkBudget: Budget = { cpuMs: options.checkCpuMs ?? 30_000, wallMs: 0 };
  checkBudget.wallMs = wall(checkBudget.cpuMs);
  const startBudget: Budget = { cpuMs: options.startCpuMs ?? 600_000, wallMs: 0 };
  startBudget.wallMs = wall(startBudget.cpuMs);
  let running: Running | null = null;
  let closed = false;
  let queue: Promise<unknown> = Promise.resolve();
  let nextId = 0;

  /** Samples the CPU of the process until the budget is spent; resolves null when stopped first. */
  async function watchdog(svc: Running, budget: Budget, stop: AbortSignal): Promise<Outcome | null> {
    const started = performance.now();
    const cpu0 = (await svc.proc.usage()).cpuMs;
    while (!stop.aborted) {
      await sleep(options.pollMs ?? 100, undefined, { signal: stop }).catch(() => {});
      if (stop.aborted) return null;
      const cpuMs = (await svc.proc.usage()).cpuMs - cpu0;
      if (cpuMs > budget.cpuMs)
        return { kind: 'timeout', limit: 'cpu', cpuMs, why: `used more than ${budget.cpuMs} ms of CPU` };
      if (performance.now() - started > budget.wallMs)
        return {
          kind: 'timeout',
          limit: 'wall',
          cpuMs,
          why: `took more than ${budget.wallMs} ms of wall-clock time`,
        };
    }
    return null;
  }

  /** Waits for the first line `accept` takes, the end of the process, or the end of the budget. */
  async function awaitLine(
    svc: Running,
    accept: (l: ServiceLine) => boolean,
    budget: Budget,
  ): Promise<Outcome> {
    const stop = new AbortController();
    const timer = watchdog(svc, budget, stop.signal);
    try {
      for (;;) {
        const text = svc.lines.shift();
        if (text !== undefined) {
          const parsed = parseLine(text);
          if ('why' in parsed) return { kind: 'broken', why: parsed.why };
          if (accept(parsed.line)) return { kind: 'line', line: parsed.line };
          continue; // the answer to a check whose caller stopped waiting
        }
        if (svc.lines.overflowed)
          return { kind: 'broken', why: `an answer line is longer than ${MAX_LINE_CHARS} characters` };
        if (svc.lines.ended) return { kind: 'exited', exit: await svc.proc.exited };
        const out = await Promise.race([svc.lines.changed().then(() => null), timer]);
        if (out) return out;
      }
    } finally {
      stop.abort();
    }
  }

  /** Kills the process (if still running) and forgets it. */
  async function discard(svc: Running): Promise<SpawnExit> {
    if (running === svc) running = null;
    svc.proc.kill();
    return svc.proc.exited;
  }

  /** What an outcome other than an accepted line means for the caller (the process is discarded). */
  async function failure(
    svc: Running,
    out: Exclude<Outcome, { kind: 'line' }>,
    phase: string,
  ): Promise<TypecheckResult> {
    const exit = out.kind === 'exited' ? out.exit : await discard(svc);
    if (running === svc) running = null;
    const typescriptVersion = { typescript: svc.ready?.typescript ?? null };
    if (out.kind === 'timeout') {
      log.warn(`type-check ${phase} ${out.why}: killed, the service restarts at the next check`);
      return noVerdict('timeout', `the type-check ${phase} ${out.why}`, {
        cpuMs: out.cpuMs,
        limit: out.limit,
        ...typescriptVersion,
      });
    }
    const why = out.kind === 'broken' ? out.why : `the service ${describeExit(exit)}`;
    log.warn(`type-check ${phase}: ${why}; stderr: ${svc.stderr.text.trim().slice(-500)}`);
    return noVerdict(
      'error',
      `the type-check ${phase} failed: ${why}${svc.stderr.text ? `\n${svc.stderr.text}` : ''}`,
      typescriptVersion,
    );
  }

  async function start(): Promise<Running | TypecheckResult> {
    const readOnlyPaths = await serviceReadOnlyPaths({
      workspaceDir: options.workspaceDir,
      configDir,
      typescript,
      node,
      extra: options.readOnlyPaths ?? [],
    });
    const proc = await options.confinement.spawn({
      argv: [
        node,
        ...(options.nodeFlags ?? ['--max-semi-space-size=64']),
        SERVICE_ENTRY,
        '--root',
        options.workspaceDir,
        '--typescript',
        typescript.modulePath,
        '--',
        ...options.tscArgs,
      ],
      cwd: options.workspaceDir,
      readOnlyPaths,
      env: { PATH: `${dirname(node)}:/usr/bin:/bin`, HOME: '/tmp', TMPDIR: '/tmp', LANG: 'C.UTF-8' },
      limits: { ...DEFAULT_LIMITS, ...options.limits },
    });
    const svc: Running = {
      proc,
      lines: readLines(proc.stdout, MAX_LINE_CHARS),
      ready: null,
      exit: null,
      stderr: { text: '' },
    };
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (c: string) => {
      svc.stderr.text = (svc.stderr.text + c).slice(-STDERR_TAIL);
    });
    void proc.exited.then((exit) => {
      svc.exit = exit;
    });
    log(
      `type-check service starting for ${options.workspaceDir} (${options.tscArgs.join(' ')}), typescript ${typescript.version}`,
    );
    const out = await awaitLine(svc, (l) => l.type === 'ready' || l.type === 'fatal', startBudget);
    if (out.kind !== 'line') return failure(svc, out, 'start');
    if (out.line.type === 'fatal') {
      await discard(svc);
      return noVerdict('error', `the type-check service cannot serve this workspace: ${out.line.error}`);
    }
    if (out.line.type !== 'ready') return failure(svc, { kind: 'broken', why: 'no ready line' }, 'start');
    svc.ready = out.line;
    log(
      `type-check service ready: ${out.line.files} files, ${out.line.cpuMs} ms CPU, typescript ${out.line.typescript}`,
    );
    return svc;
  }

  async function runCheck(
    overlay: Record<string, string>,
    target: string | undefined,
    signal?: AbortSignal,
  ): Promise<TypecheckResult> {
    signal?.throwIfAborted();
    if (closed) return noVerdict('error', 'the type-check service is closed');
    const svc =
      running && !running.exit
        ? running
        : await start().catch((err: Error) =>
            noVerdict('error', `the type-check service cannot start: ${err.message}`),
          );
    if ('status' in svc) return svc;
    running = svc;
    if (closed) {
      await discard(svc);
      return noVerdict('error', 'the type-check service is closed');
    }
    const id = ++nextId;
    svc.proc.stdin.write(`${JSON.stringify({ id, overlay, ...(target ? { target } : {}) })}\n`);
    const out = await awaitLine(
      svc,
      (l) => l.type === 'answer' && (l.id === id || l.id === null),
      checkBudget,
    );
    if (out.kind !== 'line') return failure(svc, out, 'check');
    const line = out.line;
    if (line.type !== 'answer')
      return failure(svc, { kind: 'broken', why: `unexpected ${line.type} line` }, 'check');
    const typescriptVersion = svc.ready?.typescript ?? null;
    if (line.status === 'error')
      return noVerdict('error', `the type-check service refused the check: ${line.error}`, {
        cpuMs: line.cpuMs,
        typescript: typescriptVersion,
      });
    const { status, diagnostics, diagnosticCount, api, cpuMs, scope, checkedFiles } = line;
    return {
      status,
      diagnostics,
      diagnosticCount,
      api,
      cpuMs,
      error: null,
      limit: null,
      typescript: typescriptVersion,
      scope,
      checkedFiles,
    };
  }

  return {
    typescript,
    check(overlay, checkOptions = {}) {
      const job = queue.then(() => runCheck(overlay, checkOptions.target, checkOptions.signal));
      queue = job.catch(() => {});
      const signal = checkOptions.signal;
      if (!signal) return job;
      // The caller stops waiting; a check already sent completes in the queue (bounded by its budget).
      return new Promise<TypecheckResult>((resolve, reject) => {
        const onAbort = () => reject(signal.reason);
        if (signal.aborted) onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        job.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
      });
    },
    async close() {
      closed = true;
      if (running) await discard(running);
      // A check still starting the process when close() was called discards it itself.
      await queue;
    },
  };
}
