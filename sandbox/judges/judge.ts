import type { TestRunner } from '../../protocol/task.ts';
import type { Verdict } from './verdict.ts';

/** Where a judge runs: the box and the toolchain it may use. */
export interface JudgeContext {
  /** Absolute path of the box (the working directory of the run). */
  box: string;
  /** Absolute path of the node binary. */
  node: string;
  /** Absolute path the report must be written to (inside the box). */
  reportPath: string;
}

/** A test runner driven with a machine-readable reporter. */
export interface Judge {
  readonly runner: TestRunner;
  /** Argv that runs exactly `testFiles` (box-relative) and writes the report to `ctx.reportPath`. */
  argv(ctx: JudgeContext, testFiles: string[]): Promise<string[]>;
  /** Extra read-only paths the run needs (the reporter module, ...). */
  readOnlyPaths(): string[];
  /** Parses the report into per-test results; throws VerdictError when it is malformed. */
  parse(report: string, box: string): Verdict;
  /** Version of the runner in this box, for fingerprints. */
  version(box: string): Promise<string>;
}
