/**
 * Drop and skip reasons, normalised so that the same cause groups across files and repositories:
 * paths, file names, hex ids and numbers are replaced by placeholders, test-name lists are cut (pure).
 */
import { createHash } from 'node:crypto';

/** A reason and how many tasks (or files) gave it. */
export interface ReasonCount {
  reason: string;
  count: number;
}

const LISTED = /((?:are missing|not in the reference|ran in the reference but not here|failed)): .*$/s;
const ABSOLUTE_PATH = /(^|[\s('"`=])\/[^\s)'"`,;]+/g;
/** A workspace file named with at least one folder (`src/x.ts`), not a bare `package.json` or `*.test-d.ts`. */
const FILE_NAME = /[\w@.~-]*(?:\/[\w@.~-]+)+\.(?:[cm]?[jt]sx?|json)\b/g;
const HEX = /\b[0-9a-f]{8,}\b/g;
const NUMBER = /\d+(?:\.\d+)?/g;

/** One reason with its variable parts replaced: `<path>`, `<file>`, `<hex>`, `N`. */
export function normaliseReason(reason: string): string {
  const firstLine = reason.split('\n')[0] ?? '';
  return firstLine
    .replace(LISTED, '$1: …')
    .replace(ABSOLUTE_PATH, '$1<path>')
    .replace(FILE_NAME, '<file>')
    .replace(HEX, '<hex>')
    .replace(NUMBER, 'N')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 240);
}

/** Counts each normalised reason once per item (an item is one task's or one file's reasons), most first. */
export function groupReasons(items: readonly (readonly string[])[]): ReasonCount[] {
  const counts = new Map<string, number>();
  for (const reasons of items)
    for (const r of new Set(reasons.map(normaliseReason))) counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts]
    .map(([reason, count]) => ({ reason, count }))
    .sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : 1));
}

/**
 * A deterministic sample of `n` tasks: ordered by sha256 of kind and target (not of the task id, which
 * changes with any edit of the workspace), so the same checkout always calibrates the same tasks.
 */
export function sampleTasks<T extends { kind: string; target: string }>(tasks: readonly T[], n: number): T[] {
  const key = (t: T) => createHash('sha256').update(`${t.kind}:${t.target}`).digest('hex');
  return tasks
    .map((t) => ({ t, k: key(t) }))
    .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
    .slice(0, Math.max(0, n))
    .map((x) => x.t);
}
