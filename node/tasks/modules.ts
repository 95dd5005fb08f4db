import { posix } from 'node:path';
import { type ProjectInfo, packageOf } from './project.ts';

/** Folders that hold a package's sources: the module is the folder below them. */
const SOURCE_ROOTS = new Set(['src', 'lib', 'source', 'sources']);

/** A file name without its extensions and test suffix: `amount.test.ts` -> `amount`. */
export function stem(path: string): string {
  return posix
    .basename(path)
    .replace(/\.(test|spec)(-d)?(?=\.)/, '')
    .replace(/\.[^.]+$/, '')
    .replace(/\.d$/, '');
}

/**
 * The module a source file belongs to: the workspace package in a monorepo; otherwise the folder
 * below `src/` (`src/journal/entry.ts` -> `journal`), or the file's own name for a file directly in
 * `src/` (`src/util.ts` -> `util`); outside a source folder, the top folder (`scripts/x.ts` -> `scripts`).
 */
export function moduleOf(project: ProjectInfo, path: string): string {
  const pkg = packageOf(project, path);
  if (pkg) return pkg.name;
  const segs = path.split('/');
  if (segs.length >= 3 && SOURCE_ROOTS.has(segs[0]!)) return segs[1]!;
  if (segs.length === 2 && SOURCE_ROOTS.has(segs[0]!)) return stem(path);
  if (segs.length >= 2) return segs[0]!;
  return stem(path);
}

/**
 * The source a test file pairs with by layout, among the sources it exercises: `X.test.ts` beside
 * `X.ts`, or `tests/a/X.test.ts` mirroring `src/a/X.ts`, else a source in a folder named `X`. Null when no exercised source shares its name
 * (a folder-level test, or a test named for a feature).
 */
export function pairedSource(test: string, exercised: readonly string[]): string | null {
  const name = stem(test);
  const byFile = exercised.filter((s) => stem(s) === name);
  // Else the folder named like the test (`parser.test.ts` <-> `src/parser/index.ts`).
  const same =
    byFile.length > 0 ? byFile : exercised.filter((s) => posix.basename(posix.dirname(s)) === name);
  if (same.length === 0) return null;
  const dir = posix.dirname(test);
  const beside = same.find((s) => posix.dirname(s) === dir);
  if (beside) return beside;
  // Mirrored trees: compare the folders below the first segment (tests/a <-> src/a).
  const tail = (p: string) => posix.dirname(p).split('/').slice(1).join('/');
  return same.find((s) => tail(s) === tail(test)) ?? same[0]!;
}
