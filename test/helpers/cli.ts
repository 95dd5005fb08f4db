import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from '../../node/async/sleep.ts';
import { logText, logTextStream } from './log-lines.ts';
import { type Checked, GiveUp, notYet, pollFor } from './poll.ts';

export const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = join(REPO, 'bin', 'vtnode.js');

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `vtnode ARGS` to completion (bounded by timeoutMs). */
export function vtnode(
  args: string[],
  options: { timeoutMs?: number; env?: NodeJS.ProcessEnv; prefix?: string[] } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const [cmd, ...pre] = [...(options.prefix ?? []), process.execPath];
    const child = spawn(cmd!, [...pre, BIN, ...args], {
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`vtnode ${args.join(' ')} timed out\n${stderr}`));
    }, options.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      // Log lines (pino JSON) as text, so assertions read messages; `logRecords` parses the raw form.
      resolve({ code, stdout, stderr: logText(stderr) });
    });
  });
}

/** A long-running vtnode process (a daemon) whose output is kept for assertions. */
export interface Proc {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  /** Waits until the output matches `pattern` (bounded: 60 s by default, a start on a loaded machine is slow). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
}

/**
 * Resolves with a child's exit code once it exited AND its stdout/stderr were read to the end ('close'):
 * on 'exit' alone the last lines (a `--json` summary, a final log line) may still be in the pipe. Should a
 * process it started keep the pipes open, the exit code comes 2 s after the exit.
 */
export function exitedAndRead(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once('close', (code) => resolve(code));
    child.once('exit', (code) => setTimeout(() => resolve(code), 2000).unref());
  });
}

/**
 * Waits until a process's output matches `pattern` (bounded); fails early, with the output, once it has
 * exited AND its output was read to the end (the line may still be in the pipe at 'exit'), or 2 s after
 * its exit should a process it started hold its pipes.
 */
export async function waitForOutput(
  child: ChildProcess,
  output: () => string,
  pattern: RegExp,
  o: { timeoutMs: number; name: string },
): Promise<void> {
  let exitSeenAt: number | null = null;
  const allRead = () => (child.stdout?.closed ?? true) && (child.stderr?.closed ?? true);
  await pollFor(
    () => {
      if (pattern.test(output())) return true;
      if (child.exitCode !== null || child.signalCode !== null) {
        exitSeenAt ??= Date.now();
        if (allRead() || Date.now() - exitSeenAt > 2000)
          throw new GiveUp(`${o.name} exited (${child.exitCode ?? child.signalCode}) before ${pattern}`);
      }
      return notYet(`no match in ${output().length} chars of output`);
    },
    { what: `${o.name} to print ${pattern}`, timeoutMs: o.timeoutMs, pauseMs: 50 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; output:\n${output()}`);
  });
}

/** Tracks processes and temp dirs of one test file, so afterAll can clean everything up. */
export class Sandbox {
  readonly procs: Proc[] = [];
  readonly dirs: string[] = [];

  async tempDir(prefix = 'vtnode-test-'): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    this.dirs.push(dir);
    return dir;
  }

  /**
   * Starts `vtnode ARGS`; `prefix` runs it through another command (e.g. `ip netns exec NS`), `entry`
   * replaces bin/vtnode.js (a node the test harness builds, e.g. helpers/lying-worker.ts).
   */
  spawn(args: string[], env: NodeJS.ProcessEnv = {}, prefix: string[] = [], entry = BIN): Proc {
    const [cmd, ...pre] = [...prefix, process.execPath];
    const child = spawn(cmd!, [...pre, entry, ...args], {
      env: { ...process.env, VTNODE_DEBUG: 'vtnode:', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    // VTNODE_TEST_LOG_DIR=DIR keeps each process's output in DIR/<pid>-<command>.log (a bench or a
    // failing drill read afterwards).
    const logDir = process.env.VTNODE_TEST_LOG_DIR;
    if (logDir) {
      const file = createWriteStream(join(logDir, `${child.pid}-${args[0] ?? 'vtnode'}.log`));
      child.stdout!.pipe(file, { end: false });
      child.stderr!.pipe(file, { end: false });
      child.on('close', () => file.end());
    }
    child.stdout!.on('data', (d) => {
      out += d;
    });
    // Log lines (pino JSON) as text (`TIME LEVEL COMPONENT: MESSAGE`), so patterns match messages.
    const stderrText = logTextStream();
    child.stderr!.on('data', (d) => {
      out += stderrText.push(d);
    });
    child.stderr!.on('end', () => {
      out += stderrText.end();
    });
    const proc: Proc = {
      child,
      output: () => out,
      exited: exitedAndRead(child),
      waitFor: (pattern, timeoutMs = 60_000) =>
        waitForOutput(child, () => out, pattern, { timeoutMs, name: args[0] ?? 'vtnode' }),
    };
    this.procs.push(proc);
    return proc;
  }

  async cleanup(): Promise<void> {
    for (const p of this.procs) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    }
    await Promise.all(this.procs.map((p) => Promise.race([p.exited, sleep(5000)])));
    await Promise.all(this.dirs.map((d) => rm(d, { recursive: true, force: true })));
  }
}

/**
 * Polls `fn` (every 200 ms) until it returns a truthy value or the time runs out; return `notYet(seen)`
 * (helpers/poll.ts) instead of null to have the timeout say what it last saw.
 */
export function eventually<T>(fn: () => Promise<Checked<T>>, timeoutMs: number, what: string): Promise<T> {
  return pollFor(fn, { what, timeoutMs, pauseMs: 200 });
}

/** A TCP port free on loopback right now. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
