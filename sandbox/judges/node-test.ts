import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { Judge, JudgeContext } from './judge.ts';
import { boxRelative, parseReportJson } from './report-json.ts';
import type { TestCase, Verdict } from './verdict.ts';

/** The JSON reporter module node:test loads (read-only inside the sandbox). */
export const NODE_TEST_REPORTER = join(
  dirname(dirname(fileURLToPath(import.meta.url))),
  'reporters',
  'node-test-json.mjs',
);

/** The document reporters/node-test-json.mjs writes. */
export const NodeTestReport = z.object({
  format: z.literal('vtnode-node-test/1'),
  cases: z.array(
    z.object({
      file: z.string(),
      name: z.string(),
      status: z.enum(['passed', 'failed', 'skipped', 'todo']),
      message: z.string().optional(),
    }),
  ),
  errors: z.array(z.object({ file: z.string(), message: z.string() })),
});

/** Parses the node:test JSON report; file paths become box-relative. */
export function parseNodeTestReport(text: string, box: string): Verdict {
  const report = parseReportJson(text, NodeTestReport, 'node:test', { oneDocument: true });
  const cases: TestCase[] = report.cases.map((c) => ({ ...c, file: boxRelative(box, c.file, 'node:test') }));
  const errors = report.errors.map((e) =>
    e.file === '' ? e.message : `${boxRelative(box, e.file, 'node:test')}: ${e.message}`,
  );
  return { cases, errors };
}

/** node:test, driven with vtnode's JSON reporter (each test file in its own process). */
export function createNodeTestJudge(): Judge {
  return {
    runner: 'node:test',
    isolation: 'process-per-file',
    reportPipe: true,
    async argv(ctx: JudgeContext, testFiles: string[]) {
      return [
        ctx.node,
        '--test',
        // A handle a test leaves open (a server, an interval) would otherwise keep its file's process,
        // and so the run, alive until the wall limit: a run that gives no verdict whatever the tests said.
        '--test-force-exit',
        `--test-reporter=${NODE_TEST_REPORTER}`,
        `--test-reporter-destination=${ctx.reportPath}`,
        ...testFiles.map((f) => resolve(ctx.box, f)),
      ];
    },
    readOnlyPaths: () => [dirname(NODE_TEST_REPORTER)],
    parse: parseNodeTestReport,
    async version() {
      return `node:test@${process.version}`;
    },
  };
}
