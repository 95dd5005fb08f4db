/** Outcome of one test case as the runner reported it. */
export type CaseStatus = 'passed' | 'failed' | 'skipped' | 'todo';

export interface TestCase {
  /** Box-relative test file. */
  file: string;
  /** Full name: enclosing suites and the test's own name joined with " > ". */
  name: string;
  status: CaseStatus;
  /** First line of the failure message, for diagnostics. */
  message?: string;
}

/** Longest failure message kept for a test; the integrity sentinel's report line may be longer. */
const MESSAGE_CHARS = 300;
const SENTINEL_CHARS = 64 * 1024;

/** The first line of a failure message, capped (the sentinel's report line is kept whole). */
export function failureLine(raw: string | undefined | null): string | undefined {
  const line = raw?.split('\n')[0];
  if (!line) return undefined;
  return line.slice(0, line.includes('vtnode-sentinel:') ? SENTINEL_CHARS : MESSAGE_CHARS);
}

/** Per-test results parsed from a runner's machine-readable report. */
export interface Verdict {
  cases: TestCase[];
  /** Errors outside any test case (a file that failed to load, a failing hook, an unhandled error). */
  errors: string[];
}

/** The report is missing, unreadable or malformed: the run scores 0 with this reason. */
export class VerdictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VerdictError';
  }
}

export function countCases(cases: TestCase[]): {
  passed: number;
  failed: number;
  skipped: number;
  todo: number;
} {
  const n = { passed: 0, failed: 0, skipped: 0, todo: 0 };
  for (const c of cases) n[c.status]++;
  return n;
}

/**
 * Does the verdict agree with the runner's exit code? A runner exits 0 exactly when nothing failed.
 * Returns the reason for a disagreement, or null.
 */
export function exitCodeDisagreement(verdict: Verdict, exitCode: number | null): string | null {
  const { failed } = countCases(verdict.cases);
  const bad = failed > 0 || verdict.errors.length > 0;
  if (exitCode === null) return 'the runner did not exit normally';
  if (exitCode === 0 && bad)
    return `the runner exited 0 but its report has ${failed} failed test(s) and ${verdict.errors.length} error(s)`;
  if (exitCode !== 0 && !bad) return `the runner exited ${exitCode} but its report shows no failure`;
  return null;
}

const key = (c: TestCase) => `${c.file} :: ${c.name}`;

function multiset(cases: TestCase[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const c of cases) m.set(key(c), (m.get(key(c)) ?? 0) + 1);
  return m;
}

/**
 * Compares a run's cases with the reference's inventory (names and counts). Cases the reference
 * counted (passed or failed) must be counted again, never turned into skips. Returns the reasons for
 * every difference (empty when they agree). `ignoreFiles` are left out on both sides (the target of a
 * `tests` task, whose cases are the candidate's own).
 */
export function inventoryDifferences(
  reference: TestCase[],
  actual: TestCase[],
  ignoreFiles: string[] = [],
): string[] {
  const keep = (c: TestCase) => !ignoreFiles.includes(c.file);
  const ref = multiset(reference.filter(keep));
  const got = multiset(actual.filter(keep));
  const missing: string[] = [];
  const extra: string[] = [];
  for (const [k, n] of ref) if ((got.get(k) ?? 0) < n) missing.push(k);
  for (const [k, n] of got) if ((ref.get(k) ?? 0) < n) extra.push(k);
  const reasons: string[] = [];
  const show = (xs: string[]) =>
    xs.slice(0, 5).join('; ') + (xs.length > 5 ? `; … ${xs.length - 5} more` : '');
  if (missing.length > 0)
    reasons.push(`${missing.length} test(s) of the reference are missing: ${show(missing)}`);
  if (extra.length > 0) reasons.push(`${extra.length} test(s) not in the reference: ${show(extra)}`);
  if (reasons.length === 0) {
    const counted = (cs: TestCase[]) =>
      multiset(cs.filter((c) => keep(c) && (c.status === 'passed' || c.status === 'failed')));
    const refCounted = counted(reference);
    const gotCounted = counted(actual);
    const skipped = [...refCounted].filter(([k, n]) => (gotCounted.get(k) ?? 0) < n).map(([k]) => k);
    if (skipped.length > 0)
      reasons.push(`${skipped.length} test(s) ran in the reference but not here: ${show(skipped)}`);
  }
  return reasons;
}
