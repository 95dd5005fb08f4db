import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { Judge, JudgeContext } from './judge.ts';
import { type TestCase, type Verdict, VerdictError } from './verdict.ts';

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
  const trimmed = text.trim();
  if (trimmed.includes('\n')) throw new VerdictError('the node:test report has more than one document');
  let raw: unknown;
  try {
    raw = JSON.parse(trimmed);
  } catch (err) {
    throw new VerdictError(`the node:test report is not JSON (${(err as Error).message})`);
  }
  const parsed = NodeTestReport.safeParse(raw);
  if (!parsed.success)
    throw new VerdictError(
      `the node:test report is malformed: ${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.')}: ${i.message}`)
        .join('; ')}`,
    );
  const rel = (f: string) => {
    const r = relative(box, resolve(box, f)).split('\\').join('/');
    if (r.startsWith('..')) throw new VerdictError(`the node:test report names a file outside the box: ${f}`);
    return r;
  };
  const cases: TestCase[] = parsed.data.cases.map((c) => ({ ...c, file: rel(c.file) }));
  const errors = parsed.data.errors.map((e) => `${rel(e.file)}: ${e.message}`);
  return { cases, errors };
}

/** node:test, driven with vtnode's JSON reporter (each test file in its own process). */
export function createNodeTestJudge(): Judge {
  return {
    runner: 'node:test',
    async argv(ctx: JudgeContext, testFiles: string[]) {
      return [
        ctx.node,
        '--test',
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
