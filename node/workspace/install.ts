import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { parseJsonWith } from '../../protocol/parse.ts';
import { groupAlive, killGroup } from '../../sandbox/group-run.ts';
import { INSTALL_COMMANDS } from '../../sandbox/install-root.ts';
import { checkWorkspaceReady, describeReadiness } from '../../sandbox/workspace-ready.ts';
import { pause } from '../async/sleep.ts';
import { logger } from '../logger.ts';

const log = logger('vtnode:workspace:install');

/** One command of an install plan. */
export interface PlannedCommand {
  /** Program to run (no shell). */
  file: string;
  args: string[];
}

const PackageScripts = z.object({ scripts: z.record(z.string(), z.string()).optional() });

/**
 * The commands that make a fetched workspace runnable, from its root files and package.json: the
 * install its lockfile pins (pnpm, yarn, npm ci; `npm install` without a lockfile), then its build
 * when package.json declares a `build` script. Pure.
 */
export function installPlan(
  rootFiles: ReadonlySet<string>,
  packageJson: string | null,
  input: string,
): PlannedCommand[] {
  if (packageJson === null) return [];
  const { scripts } = parseJsonWith(PackageScripts, packageJson, input);
  const found = INSTALL_COMMANDS.find((c) => rootFiles.has(c.lockfile));
  const install = found?.command ?? 'npm install';
  const [file, ...args] = install.split(' ');
  const plan: PlannedCommand[] = [{ file: file!, args }];
  if (scripts?.build) {
    const manager = found?.manager ?? 'npm';
    plan.push(
      manager === 'yarn' ? { file: 'yarn', args: ['build'] } : { file: manager, args: ['run', 'build'] },
    );
  }
  return plan;
}

export interface InstallWorkspaceOptions {
  /** Root of the fetched workspace. */
  root: string;
  /** Workspace-relative paths of its files (the manifest's). */
  files: readonly string[];
  /** Longest the whole install may take, ms (default 15 min). */
  timeoutMs?: number;
  /** Stops the install (the running command is killed). */
  signal?: AbortSignal;
}

/** The environment of a workspace's install commands. */
export function installEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    // No audit or funding calls: the install is what the lockfile pins, nothing more.
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    // The lockfile's integrity hashes check what the cache holds: no need to ask the registry again.
    npm_config_prefer_offline: 'true',
  };
}

/**
 * Runs one install command as the leader of its own process group. An abort kills the whole group
 * (npm's and the build's children too), and the promise settles only once the group is gone, so the
 * caller never removes or reuses a tree that a dying install still writes into.
 */
function runCommand(cmd: PlannedCommand, cwd: string, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd.file, cmd.args, {
      cwd,
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
      env: installEnv(),
    });
    const what = `${cmd.file} ${cmd.args.join(' ')} in ${cwd}`;
    const onAbort = () => killGroup(child);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    child.on('error', (err) => {
      signal.removeEventListener('abort', onAbort);
      reject(new Error(`${what}: ${err.message}`));
    });
    child.on('close', async (code, sig) => {
      signal.removeEventListener('abort', onAbort);
      // The leader is gone; what it started may not be (a killed group, or a leader that left children).
      await reapGroup(child);
      if (signal.aborted) reject(signal.reason ?? new Error(`${what}: aborted`));
      else if (code === 0) resolve();
      else
        reject(
          new Error(`${what} exited with ${code ?? sig}: ${stderr.trim().split('\n').slice(-5).join(' | ')}`),
        );
    });
  });
}

/** Kills what is left of a command's process group and waits (at most 5 s) until none of it runs. */
async function reapGroup(child: ChildProcess): Promise<void> {
  if (child.pid === undefined) return;
  killGroup(child);
  const deadline = performance.now() + 5000;
  while (groupAlive(child.pid) && performance.now() < deadline) await pause(20);
}

/**
 * Installs a fetched workspace's dependencies with its own package manager and lockfile, builds it
 * when it declares a build, then checks its dependencies resolve (sandbox/workspace-ready.ts). Runs
 * outside the candidate sandbox, as its owner would. Throws naming the command that failed.
 */
export async function installWorkspace(
  options: InstallWorkspaceOptions,
): Promise<{ commands: string[]; ms: number }> {
  const { root } = options;
  const started = Date.now();
  const timeout = AbortSignal.timeout(options.timeoutMs ?? 15 * 60_000);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  const rootFiles = new Set(options.files.filter((f) => !f.includes('/')));
  const pkgPath = join(root, 'package.json');
  const pkg = rootFiles.has('package.json') ? await readFile(pkgPath, 'utf8') : null;
  const plan = installPlan(rootFiles, pkg, pkgPath);
  for (const cmd of plan) {
    log('%s: running %s %s', root, cmd.file, cmd.args.join(' '));
    await runCommand(cmd, root, signal);
  }
  const ready = checkWorkspaceReady({ workspace: root });
  if (!ready.ok) throw new Error(describeReadiness(root, ready));
  return { commands: plan.map((c) => [c.file, ...c.args].join(' ')), ms: Date.now() - started };
}
