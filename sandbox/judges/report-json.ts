import { relative, resolve } from 'node:path';
import type { z } from 'zod';
import { failureLine, VerdictError } from './verdict.ts';

/**
 * Parses a runner's JSON report with its schema. Throws VerdictError naming the runner and the first
 * fields that do not match; with `oneDocument`, a report holding more than one line is refused (a
 * second document appended by a test would otherwise be ignored or confuse the parser).
 */
export function parseReportJson<S extends z.ZodType>(
  text: string,
  schema: S,
  runner: string,
  options: { oneDocument?: boolean } = {},
): z.infer<S> {
  const trimmed = text.trim();
  if (options.oneDocument && trimmed.includes('\n'))
    throw new VerdictError(`the ${runner} report has more than one document`);
  let raw: unknown;
  try {
    raw = JSON.parse(trimmed);
  } catch (err) {
    throw new VerdictError(`the ${runner} report is not JSON (${(err as Error).message})`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    throw new VerdictError(
      `the ${runner} report is malformed: ${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.') || '(document)'}: ${i.message}`)
        .join('; ')}`,
    );
  return parsed.data;
}

/** A report's file path made box-relative (POSIX); a path outside the box is a VerdictError. */
export function boxRelative(box: string, file: string, runner: string): string {
  const rel = relative(box, resolve(box, file)).split('\\').join('/');
  if (rel === '' || rel.startsWith('..') || rel.startsWith('/'))
    throw new VerdictError(`the ${runner} report names a file outside the box: ${file}`);
  return rel;
}

const ANSI = /\u001b\[[0-9;]*[A-Za-z]/g;

/**
 * The first informative line of a runner's failure text, capped like every failure message (see
 * failureLine): colour codes, blank lines and jest's "● Test suite failed to run" headings are skipped.
 */
export function firstLine(text: string, fallback = 'failed'): string {
  const line = text
    .replace(ANSI, '')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '' && !l.startsWith('●'));
  return failureLine(line) ?? fallback;
}
