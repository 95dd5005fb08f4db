import { join, resolve } from 'node:path';
import { parseJestJsonReport } from './jest-json.ts';
import type { Judge, JudgeContext } from './judge.ts';
import { binOf, findRunnerPackage, RunnerMissingError, runnerFile, runnerVersion } from './runner-package.ts';
import type { Verdict } from './verdict.ts';

/** The oldest jest whose CLI can force worker processes (`--workerIdleMemoryLimit`, jest 29.3). */
export const MIN_JEST: readonly [number, number] = [29, 3];

/** Parses jest's `--json` report; file paths become box-relative. */
export function parseJestReport(text: string, box: string): Verdict {
  return parseJestJsonReport(text, box, 'jest');
}

/** True when `version` (semver text) is at least `min` (major, minor). */
export function atLeast(version: string, min: readonly [number, number]): boolean {
  const m = /^(\d+)\.(\d+)/.exec(version);
  if (!m) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > min[0] || (major === min[0] && minor >= min[1]);
}

/**
 * The flags of a judged jest run, after the workspace's config (jest.config.*, package.json "jest")
 * which jest finds from the run's cwd:
 * - exactly the given files (`--runTestsByPath`, absolute paths), `--ci` (a missing snapshot fails
 *   instead of being written), no watchman, no coverage, no bail;
 * - `--cache=false` with the cache folder inside the box: a test could otherwise plant transformed code
 *   for a later test file in the transform cache (jest still writes it there, never reads it);
 * - worker processes, never in-band: jest runs a single test file (or one worker) in its own process
 *   unless a `workerIdleMemoryLimit` is set, and a test in the process that writes the report could
 *   patch `fs` and forge it. The limit is far above any worker's heap, so workers are not recycled;
 * - `--forceExit`: a handle left open by globalSetup cannot keep the run alive after the report.
 */
export function jestFlags(ctx: JudgeContext): string[] {
  return [
    '--ci',
    '--runTestsByPath',
    '--json',
    `--outputFile=${ctx.reportPath}`,
    '--watchman=false',
    '--coverage=false',
    '--bail=0',
    '--cache=false',
    `--cacheDirectory=${join(ctx.box, '.tmp', 'jest-cache')}`,
    '--maxWorkers=1',
    '--workerIdleMemoryLimit=64GB',
    '--forceExit',
  ];
}

/** jest, driven with its own JSON output (`--json --outputFile`), in worker processes. */
export function createJestJudge(): Judge {
  return {
    runner: 'jest',
    isolation: 'registry-per-file',
    reportPipe: true,
    async argv(ctx: JudgeContext, testFiles: string[]) {
      const jest = await findRunnerPackage(ctx.box, ctx.cwd, 'jest');
      const version = jest.json.version ?? '0.0.0';
      if (!atLeast(version, MIN_JEST))
        throw new RunnerMissingError(
          `jest ${version} is older than ${MIN_JEST.join('.')}: vtnode needs --workerIdleMemoryLimit to keep the tests out of the process that writes the report; upgrade jest`,
        );
      const bin = binOf(jest.json, 'jest') ?? 'bin/jest.js';
      return [
        ctx.node,
        await runnerFile(jest, 'jest', bin),
        ...jestFlags(ctx),
        ...testFiles.map((f) => resolve(ctx.box, f)),
      ];
    },
    readOnlyPaths: () => [],
    parse: parseJestReport,
    version: (box, cwd) => runnerVersion(box, 'jest', cwd),
  };
}
