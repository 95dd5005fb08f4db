import { isBuiltin } from 'node:module';
import { posix } from 'node:path';
import type { TestRunner } from '../../protocol/task.ts';
import { checkWorkspaceReady, type Readiness } from '../../sandbox/workspace-ready.ts';
import type { ParsedFile } from './parse.ts';
import { type ProjectInfo, packageOf, tsconfigFor } from './project.ts';

/** Config files that make a folder the root of a runner's run. */
const RUNNER_CONFIG: Record<TestRunner, RegExp> = {
  vitest: /^vitest\.(config|workspace)\.[cm]?[jt]s$|^vite\.config\.[cm]?[jt]s$/,
  jest: /^jest\.config\.[cm]?[jt]s(on)?$/,
  mocha: /^\.mocharc(\.[cm]?[jt]s|\.json|\.ya?ml)?$/,
  'node:test': /$^/,
};

/** The package a bare specifier names: `@scope/pkg/sub` -> `@scope/pkg`, `pkg/sub` -> `pkg`. */
export function packageRoot(specifier: string): string | null {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('#')) return null;
  if (isBuiltin(specifier)) return null;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? (parts.length >= 2 ? `${parts[0]}/${parts[1]}` : null) : parts[0]!;
}

/** Whether the tsconfig governing `file` maps `specifier` through `paths` (`radashi` -> `src/mod.ts`). */
function mappedByPaths(project: ProjectInfo, file: string, specifier: string): boolean {
  const paths = tsconfigFor(project, file)?.paths ?? {};
  return Object.keys(paths).some((pattern) => {
    const star = pattern.indexOf('*');
    if (star < 0) return pattern === specifier;
    const [head, tail] = [pattern.slice(0, star), pattern.slice(star + 1)];
    return (
      specifier.length >= head.length + tail.length && specifier.startsWith(head) && specifier.endsWith(tail)
    );
  });
}

/**
 * Workspace packages (the root's own name, members) that `files` import by name, each with the
 * workspace-relative folder of the importing file (where Node starts looking for it). A name the
 * tsconfig's `paths` maps to sources is left out: the repository's test setup resolves it that way
 * (vitest with tsconfig paths, ts-jest's moduleNameMapper, tsx), so no build is needed for it.
 */
export function importedWorkspacePackages(
  project: ProjectInfo,
  files: Iterable<ParsedFile>,
): { name: string; from: string }[] {
  const names = new Set(project.packages.map((p) => p.name));
  if (project.rootPackage?.name) names.add(project.rootPackage.name);
  const out = new Map<string, { name: string; from: string }>();
  for (const f of files)
    for (const i of f.imports) {
      const name = packageRoot(i.specifier);
      const from = posix.dirname(f.path) === '.' ? '' : posix.dirname(f.path);
      if (name !== null && names.has(name) && !mappedByPaths(project, f.path, i.specifier))
        out.set(`${name}\0${from}`, { name, from });
    }
  return [...out.values()].sort((a, b) => (a.name + a.from < b.name + b.from ? -1 : 1));
}

/**
 * The folder the judge runs in: the monorepo member that owns every test file when it has its own
 * config for the runner (its tests are configured there, as `npm test -w member` runs them); else the
 * workspace root (undefined).
 */
export function judgeCwdFor(
  project: ProjectInfo,
  runner: TestRunner,
  testFiles: string[],
): string | undefined {
  const owners = new Set(testFiles.map((t) => packageOf(project, t)?.dir ?? ''));
  if (owners.size !== 1) return undefined;
  const dir = [...owners][0]!;
  if (dir === '') return undefined;
  const hasConfig = project.files.some(
    (f) => posix.dirname(f) === dir && RUNNER_CONFIG[runner].test(posix.basename(f)),
  );
  return hasConfig ? dir : undefined;
}

/**
 * Can the judges run in the mined workspace as installed? The runner and every package's declared
 * dependencies must resolve (node_modules up to the install root), and the workspace packages that
 * tests import by name must be built when their entry point is a build output.
 */
export function mineReadiness(
  project: ProjectInfo,
  runner: TestRunner,
  testSide: Iterable<ParsedFile>,
): Readiness {
  return checkWorkspaceReady({
    workspace: project.root,
    runners: [runner],
    packageDirs: ['', ...project.packages.map((p) => p.dir)],
    imported: importedWorkspacePackages(project, testSide),
  });
}
