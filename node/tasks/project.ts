import { readFileSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import ts from 'typescript';
import { findInstallRoot, isWorkspaceMember, workspacePatternsAt } from '../../sandbox/install-root.ts';

/** The parts of a package.json the miner reads. */
export interface PackageJson {
  name?: string;
  main?: string;
  module?: string;
  types?: string;
  exports?: unknown;
  /** Package-internal import map (`#internal` specifiers). */
  imports?: unknown;
  workspaces?: string[] | { packages?: string[] };
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** One package of the workspace: the root package, or a member of a monorepo. */
export interface WorkspacePackage {
  /** Workspace-relative directory, `''` for the root. */
  dir: string;
  /** Package name from package.json (the directory name when it has none). */
  name: string;
  json: PackageJson;
}

/** A tsconfig the miner found: its module resolution settings and the files it covers. */
export interface TsConfigInfo {
  /** Workspace-relative path of the tsconfig file. */
  path: string;
  /** Workspace-relative directory `paths` targets are resolved against. */
  pathsBase: string;
  /** `compilerOptions.paths`, as written (inherited through `extends` too). */
  paths: Record<string, string[]>;
  /** Workspace-relative `baseUrl` (bare specifiers resolve under it), or null when unset. */
  baseUrl: string | null;
  /** `customConditions` (besides the standard ones) for package `exports`/`imports`. */
  conditions: string[];
  /** Workspace-relative [outDir, rootDir] when both are set: built files map back to sources. */
  outToRoot: [string, string] | null;
  /** Workspace-relative files the config type-checks. */
  covers: Set<string>;
}

/** What the miner knows about the repository before reading any code. */
export interface ProjectInfo {
  root: string;
  /** The root package.json, or null if there is none. */
  rootPackage: PackageJson | null;
  /** Monorepo members (not the root), longest directory first. */
  packages: WorkspacePackage[];
  /** Directories with their own package.json that are not workspace members: separate projects. */
  foreign: string[];
  /** tsconfig.json of the root and of each member that has one. */
  tsconfigs: TsConfigInfo[];
  /** Every file of the workspace (see listWorkspaceFiles), minus foreign projects. */
  files: string[];
  /** Config files present at the root (vitest.config.ts, jest.config.js, ...), by name. */
  rootConfigs: string[];
  /**
   * The package.json of the monorepo root this root is a member of (its dependencies are hoisted
   * there: the runner is often declared only there), or null when the root is its own install root.
   */
  hostPackage: PackageJson | null;
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return null;
  }
}

function loadTsConfig(root: string, rel: string): TsConfigInfo | null {
  const abs = join(root, rel);
  const read = ts.readConfigFile(abs, ts.sys.readFile);
  if (read.error) return null;
  const dir = posix.dirname(rel);
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, join(root, dir), undefined, abs);
  const toRel = (p: string) => relative(root, p).split(sep).join('/');
  const base =
    (parsed.options['pathsBasePath'] as string | undefined) ?? parsed.options.baseUrl ?? join(root, dir);
  const { outDir, rootDir, baseUrl, customConditions } = parsed.options;
  return {
    path: rel,
    pathsBase: toRel(baseUrl ?? base),
    paths: (parsed.options.paths as Record<string, string[]> | undefined) ?? {},
    baseUrl: baseUrl ? toRel(baseUrl) : null,
    conditions: customConditions ?? [],
    outToRoot: outDir && rootDir ? [toRel(outDir), toRel(rootDir)] : null,
    covers: new Set(parsed.fileNames.map(toRel)),
  };
}

/** Whether a package.json describes a package of its own (a name, dependencies, scripts or workspaces). */
function declaresPackage(json: PackageJson): boolean {
  const j = json as Record<string, unknown>;
  return ['name', 'dependencies', 'devDependencies', 'peerDependencies', 'scripts', 'workspaces'].some(
    (k) => j[k] !== undefined,
  );
}

/** Reads package.json files, workspace members and tsconfigs of the repository at `root`. */
export function readProject(root: string, allFiles: string[]): ProjectInfo {
  const rootPackage = readJson(join(root, 'package.json')) as PackageJson | null;
  const patterns = workspacePatternsAt(root);

  const packages: WorkspacePackage[] = [];
  const foreign: string[] = [];
  const pkgDirs = allFiles
    .filter((f) => f === 'package.json' || f.endsWith('/package.json'))
    .map((f) => posix.dirname(f))
    .filter((d) => d !== '.')
    .sort((a, b) => a.length - b.length);
  for (const dir of pkgDirs) {
    if (foreign.some((f) => dir.startsWith(`${f}/`))) continue;
    const member = isWorkspaceMember(patterns, dir);
    const json = (readJson(join(root, dir, 'package.json')) as PackageJson | null) ?? {};
    // A package.json that declares no package (`{"type": "module"}` in luxon's src/) only tells Node
    // how to load the folder's files: the folder stays part of this project.
    if (!member && !declaresPackage(json)) continue;
    if (!member) {
      foreign.push(dir);
      continue;
    }
    packages.push({ dir, name: json.name ?? posix.basename(dir), json });
  }
  packages.sort((a, b) => b.dir.length - a.dir.length);

  const files = allFiles.filter((f) => !foreign.some((d) => f.startsWith(`${d}/`)));
  const tsconfigs: TsConfigInfo[] = [];
  for (const dir of ['', ...packages.map((p) => p.dir)]) {
    const rel = dir === '' ? 'tsconfig.json' : `${dir}/tsconfig.json`;
    if (!files.includes(rel)) continue;
    const info = loadTsConfig(root, rel);
    if (info) tsconfigs.push(info);
  }
  tsconfigs.sort((a, b) => b.path.length - a.path.length);
  const rootConfigs = files.filter(
    (f) => !f.includes('/') && /\.config\.[cm]?[jt]s$|^\.mocharc|^jest\.config/.test(f),
  );
  const installRoot = findInstallRoot(root);
  const hostPackage =
    installRoot === root ? null : ((readJson(join(installRoot, 'package.json')) as PackageJson | null) ?? {});
  return { root, rootPackage, packages, foreign, tsconfigs, files, rootConfigs, hostPackage };
}

/** The monorepo member owning `path`, or null for the root package. */
export function packageOf(project: ProjectInfo, path: string): WorkspacePackage | null {
  return project.packages.find((p) => path.startsWith(`${p.dir}/`)) ?? null;
}

/** The nearest tsconfig at or above `path`'s package (the member's own, else the root's). */
export function tsconfigFor(project: ProjectInfo, path: string): TsConfigInfo | null {
  return (
    project.tsconfigs.find((c) => {
      const dir = posix.dirname(c.path);
      return dir === '.' || path.startsWith(`${dir}/`);
    }) ?? null
  );
}

/** All dependency names declared by the root package, every member, and the monorepo root hosting the root. */
export function declaredDependencies(project: ProjectInfo): Set<string> {
  const out = new Set<string>();
  for (const json of [project.rootPackage, project.hostPackage, ...project.packages.map((p) => p.json)]) {
    for (const field of ['dependencies', 'devDependencies', 'peerDependencies'] as const) {
      for (const name of Object.keys(json?.[field] ?? {})) out.add(name);
    }
  }
  return out;
}
