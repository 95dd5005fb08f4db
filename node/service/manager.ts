/**
 * Runs the plans of node/service/units.ts: writes or removes the file and runs launchctl/systemctl
 * through an injected runner (tests record the commands instead of running them).
 */
import { execFile } from 'node:child_process';
import { access, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { logger } from '../logger.ts';
import {
  type CommandResult,
  type PlannedCommand,
  planInstall,
  planUninstall,
  type ServiceSpec,
  type ServiceStatus,
  serviceStatus,
  statusCommands,
} from './units.ts';

const log = logger('vtnode:service');

/** Runs one command without a shell; resolves with its answer (never rejects for a non-zero exit). */
export type CommandRunner = (argv: string[], signal?: AbortSignal) => Promise<CommandResult>;

/** The real runner: execFile, 30 s at most per command. */
export const execRunner: CommandRunner = (argv, signal) =>
  new Promise((resolve) => {
    execFile(
      argv[0]!,
      argv.slice(1),
      { timeout: 30_000, ...(signal ? { signal } : {}) },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        // A missing program (ENOENT) is an answer too: the stderr says so.
        resolve({
          code,
          stdout: String(stdout),
          stderr: String(stderr) || (err && code === null ? err.message : ''),
        });
      },
    );
  });

/** A command that had to succeed did not. */
export class ServiceCommandError extends Error {
  constructor(argv: string[], result: CommandResult) {
    const said = (result.stderr || result.stdout).trim();
    super(`\`${argv.join(' ')}\` failed (exit ${result.code ?? 'signal'})${said ? `: ${said}` : ''}`);
    this.name = 'ServiceCommandError';
  }
}

export interface ServiceManagerOptions {
  /** Runs launchctl/systemctl/loginctl (execRunner outside tests). */
  run: CommandRunner;
  /** Aborts between commands. */
  signal?: AbortSignal;
}

async function runAll(commands: PlannedCommand[], options: ServiceManagerOptions): Promise<void> {
  for (const c of commands) {
    options.signal?.throwIfAborted();
    const result = await options.run(c.argv, options.signal);
    log('%s → %s', c.argv.join(' '), result.code);
    if (result.code !== 0 && !c.mayFail) throw new ServiceCommandError(c.argv, result);
  }
}

/** Writes the unit (mode 0644: init systems read it) and loads, enables and starts the service. */
export async function installService(spec: ServiceSpec, options: ServiceManagerOptions): Promise<void> {
  const plan = planInstall(spec);
  for (const dir of plan.dirs) await mkdir(dir, { recursive: true });
  const before = await readFile(plan.file.path, 'utf8').catch(() => null);
  await writeFile(plan.file.path, plan.file.text, { mode: 0o644 });
  try {
    await runAll(plan.commands, options);
  } catch (err) {
    // A service the init system did not take is not installed: the file goes back to what it was.
    if (before === null) await rm(plan.file.path, { force: true });
    else await writeFile(plan.file.path, before, { mode: 0o644 });
    throw err;
  }
}

/** Stops and unloads the service and removes its file; false when it was not installed. */
export async function uninstallService(spec: ServiceSpec, options: ServiceManagerOptions): Promise<boolean> {
  const plan = planUninstall(spec);
  const installed = await exists(plan.file);
  await runAll(plan.before, options);
  await rm(plan.file, { force: true });
  if (installed) await runAll(plan.after, options);
  return installed;
}

/** Whether the service is installed, enabled and running. */
export async function readServiceStatus(
  spec: ServiceSpec,
  options: ServiceManagerOptions,
): Promise<ServiceStatus> {
  const installed = await exists(planUninstall(spec).file);
  const answers: CommandResult[] = [];
  for (const argv of statusCommands(spec)) answers.push(await options.run(argv, options.signal));
  return serviceStatus(spec, installed, answers);
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
