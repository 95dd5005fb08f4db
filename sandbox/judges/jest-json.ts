import { z } from 'zod';
import { boxRelative, firstLine, parseReportJson } from './report-json.ts';
import { type CaseStatus, type TestCase, type Verdict, VerdictError } from './verdict.ts';

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

/** The parts of jest's `--json` output (also vitest's `--reporter=json`) the verdict relies on. */
export const JestJsonReport = z.object({
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

/**
 * Parses a report in jest's JSON format; file paths become box-relative. A test file that failed
 * without a failing case (it did not load, a hook outside any case failed) is a file-level error, and
 * `numTotalTests` must equal the cases listed.
 */
export function parseJestJsonReport(text: string, box: string, runner: string): Verdict {
  const report = parseReportJson(text, JestJsonReport, runner);
  const cases: TestCase[] = [];
  const errors: string[] = [];
  for (const file of report.testResults) {
    const rel = boxRelative(box, file.name, runner);
    for (const a of file.assertionResults) {
      const c: TestCase = {
        file: rel,
        name: [...a.ancestorTitles, a.title].join(' > '),
        status: STATUS[a.status],
      };
      const msg = a.failureMessages?.[0];
      if (c.status === 'failed' && msg) c.message = firstLine(msg);
      cases.push(c);
    }
    if (file.status === 'failed' && !file.assertionResults.some((a) => a.status === 'failed'))
      errors.push(`${rel}: ${firstLine(file.message ?? '')}`);
  }
  if (report.numTotalTests !== cases.length)
    throw new VerdictError(
      `the ${runner} report counts ${report.numTotalTests} tests but lists ${cases.length} (inconsistent report)`,
    );
  return { cases, errors };
}
