import { resolve } from 'node:path';
import { JestJsonReport, parseJestJsonReport } from './jest-json.ts';
import type { Judge, JudgeContext } from './judge.ts';
import { findRunnerPackage, runnerFile, runnerVersion } from './runner-package.ts';
import type { Verdict } from './verdict.ts';

/** The parts of vitest's `--reporter=json` output the verdict relies on (jest's JSON format). */
export const VitestReport = JestJsonReport;

/** Parses a vitest JSON report; file paths become box-relative. */
export function parseVitestReport(text: string, box: string): Verdict {
  return parseJestJsonReport(text, box, 'vitest');
}

/** vitest, driven with its JSON reporter. */
export function createVitestJudge(): Judge {
  return {
    runner: 'vitest',
    isolation: 'registry-per-file',
    reportPipe: true,
    async argv(ctx: JudgeContext, testFiles: string[]) {
      const vitest = await findRunnerPackage(ctx.box, ctx.cwd, 'vitest');
      // A vitest file argument is a substring filter: absolute paths select exactly these files.
      const files = testFiles.map((f) => resolve(ctx.box, f));
      return [
        ctx.node,
        await runnerFile(vitest, 'vitest', 'vitest.mjs'),
        'run',
        '--reporter=json',
        `--outputFile=${ctx.reportPath}`,
        '--watch=false',
        '--passWithNoTests=false',
        '--allowOnly=false',
        ...files,
      ];
    },
    readOnlyPaths: () => [],
    parse: parseVitestReport,
    version: (box, cwd) => runnerVersion(box, 'vitest', cwd),
  };
}
