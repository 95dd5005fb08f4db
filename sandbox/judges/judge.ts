import type { TestRunner } from '../../protocol/task.ts';
import type { Verdict } from './verdict.ts';

/** Where a judge runs: the box and the toolchain it may use. */
export interface JudgeContext {
  /** Absolute path of the box (the copy of the workspace; test files are relative to it). */
  box: string;
  /** Absolute working directory of the run, inside the box (the box itself, or a monorepo member). */
  cwd: string;
  /** Absolute path of the node binary. */
  node: string;
  /** Absolute path the report must be written to (inside the box). */
  reportPath: string;
}

/**
 * How much the test files of one run share (for harnesses that instrument test files):
 * - `process-per-file`: each test file runs in its own process (node:test);
 * - `registry-per-file`: each test file gets a fresh module registry and global context, but several
 *   files may run one after the other in one process, sharing node's built-in modules (jest, vitest);
 * - `shared`: every test file is loaded into one process and one module cache, and hooks declared at
 *   the top level of any file are root hooks that apply to the tests of every file (mocha).
 */
export type JudgeIsolation = 'process-per-file' | 'registry-per-file' | 'shared';

/** A test runner driven with a machine-readable reporter. */
export interface Judge {
  readonly runner: TestRunner;
  /** What the test files of one run share (see JudgeIsolation). */
  readonly isolation: JudgeIsolation;
  /**
   * The report is written by a main process that runs no test code (the tests run in processes it
   * starts), so it may leave through the report pipe (RunSpec.reportPipe) out of the tests' reach.
   */
  readonly reportPipe: boolean;
  /** Argv that runs exactly `testFiles` (box-relative) and writes the report to `ctx.reportPath`. */
  argv(ctx: JudgeContext, testFiles: string[]): Promise<string[]>;
  /** Extra read-only paths the run needs (the reporter module, ...). */
  readOnlyPaths(): string[];
  /** Parses the report into per-test results; throws VerdictError when it is malformed. */
  parse(report: string, box: string): Verdict;
  /** Version of the runner installed for `cwd` (default: the box root), for fingerprints. */
  version(box: string, cwd?: string): Promise<string>;
}
