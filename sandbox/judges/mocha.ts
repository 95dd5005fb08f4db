import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { Judge, JudgeContext } from './judge.ts';
import { boxRelative, parseReportJson } from './report-json.ts';
import { binOf, findRunnerPackage, runnerFile, runnerVersion } from './runner-package.ts';
import { type TestCase, type Verdict, VerdictError } from './verdict.ts';

const REPORTERS = join(dirname(dirname(fileURLToPath(import.meta.url))), 'reporters');
/** vtnode's mocha reporter (read-only inside the sandbox). */
export const MOCHA_REPORTER = join(REPORTERS, 'mocha-json.cjs');
/** The config module that loads the workspace's mocha config minus test selection and reporting. */
export const MOCHA_CONFIG = join(REPORTERS, 'mocharc.cjs');

/** The document reporters/mocha-json.cjs writes. */
export const MochaReport = z.object({
  format: z.literal('vtnode-mocha/1'),
  /** False when mocha stopped before the run began (a test file or a required module did not load). */
  started: z.boolean(),
  /** False when the process exited before the run's end event. */
  complete: z.boolean(),
  cases: z.array(
    z.object({
      file: z.string().min(1),
      name: z.string(),
      status: z.enum(['passed', 'failed', 'skipped', 'todo']),
      message: z.string().optional(),
    }),
  ),
  errors: z.array(z.object({ file: z.string(), message: z.string() })),
});

/**
 * Parses the mocha report; file paths become box-relative. A run that never started (a file failed to
 * load: mocha then runs nothing at all) is a verdict with one error and no case; a run that started but
 * did not end (the process exited mid-run) is refused.
 */
export function parseMochaReport(text: string, box: string): Verdict {
  const report = parseReportJson(text, MochaReport, 'mocha', { oneDocument: true });
  const errors = report.errors.map((e) =>
    e.file === '' ? `mocha: ${e.message}` : `${boxRelative(box, e.file, 'mocha')}: ${e.message}`,
  );
  if (report.started && !report.complete)
    throw new VerdictError(`the mocha run did not finish: ${errors[0] ?? 'no end event'}`);
  if (!report.started) {
    if (report.cases.length > 0)
      throw new VerdictError('the mocha report lists cases of a run that never started');
    return { cases: [], errors: errors.length > 0 ? errors : ['mocha: the run never started'] };
  }
  const cases: TestCase[] = report.cases.map((c) => ({ ...c, file: boxRelative(box, c.file, 'mocha') }));
  return { cases, errors };
}

/**
 * The flags of a judged mocha run: the workspace's config through MOCHA_CONFIG (its `spec` would
 * otherwise be added to the given files), vtnode's reporter, `--forbid-only`, and `--exit`: mocha
 * otherwise waits for every handle a test left open (a server, an interval) and the run would only end
 * at the wall limit, a run that gives no verdict whatever the tests said.
 */
export function mochaFlags(ctx: JudgeContext): string[] {
  return [
    '--config',
    MOCHA_CONFIG,
    '--no-package',
    '--reporter',
    MOCHA_REPORTER,
    '--reporter-option',
    `output=${ctx.reportPath}`,
    '--exit',
    '--forbid-only',
  ];
}

/** mocha, driven with vtnode's reporter (every test file in one process). */
export function createMochaJudge(): Judge {
  return {
    runner: 'mocha',
    isolation: 'shared',
    reportPipe: false,
    async argv(ctx: JudgeContext, testFiles: string[]) {
      const mocha = await findRunnerPackage(ctx.box, ctx.cwd, 'mocha');
      const bin = binOf(mocha.json, 'mocha') ?? 'bin/mocha.js';
      return [
        ctx.node,
        await runnerFile(mocha, 'mocha', bin),
        ...mochaFlags(ctx),
        ...testFiles.map((f) => resolve(ctx.box, f)),
      ];
    },
    readOnlyPaths: () => [REPORTERS],
    parse: parseMochaReport,
    version: (box, cwd) => runnerVersion(box, 'mocha', cwd),
  };
}
