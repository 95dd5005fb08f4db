import { realpath } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { z } from 'zod';
import type { Judge, JudgeContext } from './judge.ts';
import { packageVersion } from './package.ts';
import { type CaseStatus, failureLine, type TestCase, type Verdict, VerdictError } from './verdict.ts';

const AssertionResult = z.object({
  ancestorTitles: z.array(z.string()),
  title: z.string(),
  status: z.enum(['passed', 'failed', 'skipped', 'pending', 'todo', 'disabled']),
  failureMessages: z.array(z.string()).nullish(),
});

const FileResult = z.object({
  name: z.string().min(1),
  status: z.string(),
  message: z.string().optional(),
  assertionResults: z.array(AssertionResult),
});

/** The parts of vitest's `--reporter=json` output the verdict relies on. */
export const VitestReport = z.object({
  numTotalTests: z.number().int().nonnegative(),
  numFailedTestSuites: z.number().int().nonnegative(),
  success: z.boolean(),
  testResults: z.array(FileResult),
});

const STATUS: Record<z.infer<typeof AssertionResult>['status'], CaseStatus> = {
  passed: 'passed',
  failed: 'failed',
  skipped: 'skipped',
  pending: 'skipped',
  disabled: 'skipped',
  todo: 'todo',
};

/** Parses a vitest JSON report; file paths become box-relative. */
export function parseVitestReport(text: string, box: string): Verdict {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new VerdictError(`the vitest report is not JSON (${(err as Error).message})`);
  }
  const parsed = VitestReport.safeParse(raw);
  if (!parsed.success)
    throw new VerdictError(
      `the vitest report is malformed: ${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.')}: ${i.message}`)
        .join('; ')}`,
    );
  const report = parsed.data;
  const cases: TestCase[] = [];
  const errors: string[] = [];
  for (const file of report.testResults) {
    const rel = relative(box, resolve(box, file.name)).split('\\').join('/');
    if (rel.startsWith('..'))
      throw new VerdictError(`the vitest report names a file outside the box: ${file.name}`);
    for (const a of file.assertionResults) {
      const c: TestCase = {
        file: rel,
        name: [...a.ancestorTitles, a.title].join(' > '),
        status: STATUS[a.status],
      };
      const msg = failureLine(a.failureMessages?.[0]);
      if (c.status === 'failed' && msg) c.message = msg;
      cases.push(c);
    }
    if (file.status === 'failed' && !file.assertionResults.some((a) => a.status === 'failed'))
      errors.push(`${rel}: ${(file.message ?? 'failed').split('\n')[0]!.slice(0, 300)}`);
  }
  if (report.numTotalTests !== cases.length)
    throw new VerdictError(
      `the vitest report counts ${report.numTotalTests} tests but lists ${cases.length} (inconsistent report)`,
    );
  return { cases, errors };
}

async function vitestEntry(box: string): Promise<string> {
  const entry = join(box, 'node_modules', 'vitest', 'vitest.mjs');
  try {
    return await realpath(entry);
  } catch {
    throw new Error(`vitest is not installed in the workspace (no ${entry})`);
  }
}

/** vitest, driven with its JSON reporter. */
export function createVitestJudge(): Judge {
  return {
    runner: 'vitest',
    async argv(ctx: JudgeContext, testFiles: string[]) {
      // A vitest file argument is a substring filter: absolute paths select exactly these files.
      const files = testFiles.map((f) => resolve(ctx.box, f));
      return [
        ctx.node,
        await vitestEntry(ctx.box),
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
    async version(box: string) {
      return (await packageVersion(box, 'vitest')) ?? 'vitest@unknown';
    },
  };
}
