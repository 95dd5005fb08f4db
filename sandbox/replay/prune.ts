import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

/** Folders that hold tests, their fixtures and their expected outputs: removed whole from a replay box. */
const TEST_DIRS = new Set([
  'test',
  'tests',
  '__tests__',
  'spec',
  'specs',
  '__snapshots__',
  '__mocks__',
  '__fixtures__',
  'e2e',
]);
/** Test files and snapshots by name (`a.test.ts`, `a_spec.mjs`, `a.test-d.ts`, `a.snap`). */
const TEST_FILE = /(?:[._-](?:test|spec)s?(?:-d)?\.[cm]?[jt]sx?|\.snap)$/i;
/** Never entered: dependencies (links to read-only folders), VCS data, the box's own folders. */
const SKIP = new Set(['node_modules', '.git', '.home', '.tmp']);

/** Whether a box-relative path is a test file or lies in a test folder (see TEST_DIRS, TEST_FILE). */
export function isTestPath(rel: string): boolean {
  const parts = rel.split('/');
  return parts.slice(0, -1).some((p) => TEST_DIRS.has(p)) || TEST_FILE.test(parts.at(-1) ?? '');
}

/**
 * Removes every test file and test folder from a box's workspace copy (never following a link), so
 * that a replay run holds no test and no expected result. Returns the box-relative paths removed.
 */
export async function removeTestFiles(dir: string, also: string[] = []): Promise<string[]> {
  const removed: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(join(dir, rel), { withFileTypes: true });
    for (const e of entries) {
      const child = rel === '' ? e.name : `${rel}/${e.name}`;
      if (SKIP.has(e.name)) continue;
      if (
        (e.isDirectory() && TEST_DIRS.has(e.name)) ||
        (!e.isDirectory() && (TEST_FILE.test(e.name) || also.includes(child)))
      ) {
        await rm(join(dir, child), { recursive: true, force: true });
        removed.push(child);
      } else if (e.isDirectory()) await walk(child);
    }
  };
  await walk('');
  return removed;
}
