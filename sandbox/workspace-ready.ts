import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { z } from 'zod';
import type { TestRunner } from '../protocol/task.ts';
import { findInstallRoot, installCommand } from './install-root.ts';

/** The package a runner's judge loads from the workspace (node:test is part of Node). */
export const RUNNER_PACKAGES: Record<TestRunner, string | null> = {
  vitest: 'vitest',
  jest: 'jest',
  mocha: 'mocha',
  'node:test': null,
};

/** The package.json fields the readiness check reads. */
const Manifest = z.object({
  name: z.string().optional(),
  main: z.string().optional(),
  exports: z.unknown().optional(),
  scripts: z.record(z.string(), z.string()).optional(),
  dependencies: z.record(z.string(), z.string()).optional(),
  devDependencies: z.record(z.string(), z.string()).optional(),
});
type Manifest = z.infer<typeof Manifest>;

/** What must resolve from a workspace for a judge to run there. */
export interface ReadinessRequest {
  /** The workspace (a checkout: the mined root, or the directory a node scores in). */
  workspace: string;
  /** Runners the judges use: each one's package must resolve. */
  runners?: readonly TestRunner[];
  /** Workspace-relative package folders whose declared dependencies must resolve (default: the root). */
  packageDirs?: readonly string[];
  /** Packages the tests import by name, with the workspace-relative folder they are imported from: each must resolve, and a workspace package must be built. */
  imported?: readonly { name: string; from: string }[];
}

/** The verdict: what is missing, and the commands that fix it. */
export interface Readiness {
  ok: boolean;
  /** Where dependencies are installed from (the monorepo root for a member). */
  installRoot: string;
  /** One line per problem: a runner or dependencies not installed, a workspace package not built. */
  problems: string[];
  /** Commands to run, each with the folder to run it in. */
  fixes: { command: string; cwd: string }[];
}

/** The workspace cannot run its judges: the message says what is missing and what to run. */
export class WorkspaceNotReadyError extends Error {
  readonly readiness: Readiness;
  constructor(workspace: string, readiness: Readiness) {
    super(describeReadiness(workspace, readiness));
    this.name = 'WorkspaceNotReadyError';
    this.readiness = readiness;
  }
}

/** One paragraph for a user: the problems, then `run \`npm ci\` in /repo`. */
export function describeReadiness(workspace: string, r: Readiness): string {
  const fixes = r.fixes.map((f) => `\`${f.command}\` in ${f.cwd}`).join(', then ');
  return `${workspace} cannot run its tests: ${r.problems.join('; ')}${fixes ? `. Run ${fixes} first` : ''}`;
}

function readManifest(dir: string): Manifest | null {
  const path = join(dir, 'package.json');
  if (!existsSync(path)) return null;
  try {
    const parsed = Manifest.safeParse(JSON.parse(readFileSync(path, 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

const within = (parent: string, p: string) =>
  p === parent || p.startsWith(parent.endsWith(sep) ? parent : `${parent}${sep}`);

/**
 * The real folder of package `name` as Node finds it from `fromDir`: `node_modules/<name>` in each
 * folder up to the install root (never above it), or the package itself when it names itself and has
 * `exports` (Node's self-reference). Null when it does not resolve.
 */
export function resolvePackageDir(fromDir: string, name: string, installRoot: string): string | null {
  for (let d = fromDir; ; d = dirname(d)) {
    const manifest = readManifest(d);
    if (manifest?.name === name && manifest.exports !== undefined) return realpathSync(d);
    const candidate = join(d, 'node_modules', name, 'package.json');
    if (existsSync(candidate)) return realpathSync(dirname(candidate));
    if (d === installRoot || dirname(d) === d || !within(installRoot, d)) return null;
  }
}

/** Runtime targets of a package's main entry (`exports` `.` without `types`, or `main`). */
function entryTargets(m: Manifest): string[] {
  const out: string[] = [];
  const collect = (v: unknown, key = ''): void => {
    if (key === 'types' || v === null || v === undefined) return;
    if (typeof v === 'string') {
      if (!/\.d\.[cm]?ts$/.test(v)) out.push(v);
    } else if (Array.isArray(v)) for (const x of v) collect(x);
    else if (typeof v === 'object')
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) collect(x, k);
  };
  const exp = m.exports;
  if (exp !== undefined) {
    const obj =
      exp && typeof exp === 'object' && !Array.isArray(exp) ? (exp as Record<string, unknown>) : null;
    collect(obj && Object.keys(obj).some((k) => k.startsWith('.')) ? obj['.'] : exp);
  } else if (m.main) out.push(m.main);
  return out;
}

/** `npm run build` / `pnpm run build` / `yarn build`, for the package manager of the install root. */
function buildCommand(manager: string): string {
  return manager === 'yarn' ? 'yarn build' : `${manager} run build`;
}

/**
 * Checks that the judges can run in a workspace as it is on disk: every runner and every declared
 * dependency resolves (through node_modules up to the install root), and every workspace package the
 * tests import has its built entry point when its entry is a build output.
 */
export function checkWorkspaceReady(request: ReadinessRequest): Readiness {
  const workspace = realpathSync(request.workspace);
  const installRoot = findInstallRoot(workspace);
  const { manager, command } = installCommand(installRoot);
  const missing = new Set<string>();
  const problems: string[] = [];
  const unbuilt: { name: string; dir: string; entry: string }[] = [];
  const resolved = new Map<string, string>();

  const need = (name: string, fromDir: string) => {
    const dir = resolvePackageDir(fromDir, name, installRoot);
    if (dir === null) missing.add(name);
    else resolved.set(name, dir);
  };
  const runnerPackages = new Set<string>();
  for (const runner of request.runners ?? []) {
    const pkg = RUNNER_PACKAGES[runner];
    if (pkg !== null) runnerPackages.add(pkg);
    if (pkg !== null && resolvePackageDir(workspace, pkg, installRoot) === null)
      problems.push(
        `${runner} is not installed (no node_modules/${pkg} from ${workspace} up to ${installRoot})`,
      );
  }
  for (const rel of request.packageDirs ?? ['']) {
    const dir = join(workspace, rel);
    const m = readManifest(dir);
    for (const name of Object.keys({ ...m?.dependencies, ...m?.devDependencies })) need(name, dir);
  }
  for (const { name, from } of request.imported ?? []) need(name, join(workspace, from));
  for (const pkg of runnerPackages) missing.delete(pkg);
  if (missing.size > 0) {
    const names = [...missing].sort();
    problems.push(
      `${names.length} dependenc${names.length === 1 ? 'y is' : 'ies are'} not installed (${names.slice(0, 5).join(', ')}${names.length > 5 ? ', …' : ''})`,
    );
  }
  // A package linked in from the workspace (not installed from a registry) may need building.
  for (const [name, dir] of resolved) {
    if (dir.split(sep).includes('node_modules')) continue;
    const m = readManifest(dir);
    const targets = m ? entryTargets(m) : [];
    if (targets.length > 0 && !targets.some((t) => existsSync(join(dir, t))))
      unbuilt.push({ name, dir, entry: targets[0]! });
  }
  for (const u of unbuilt)
    problems.push(
      `workspace package ${u.name} is not built (no ${u.entry} in ${relative(installRoot, u.dir) || '.'})`,
    );
  const fixes: Readiness['fixes'] = [];
  if (missing.size > 0 || problems.some((p) => p.includes('not installed')))
    fixes.push({ command, cwd: installRoot });
  for (const dir of new Set(unbuilt.map((u) => u.dir))) {
    const scripts = readManifest(dir)?.scripts ?? {};
    fixes.push({
      command: scripts['build'] ? buildCommand(manager) : 'the build that writes its entry point',
      cwd: dir,
    });
  }
  return { ok: problems.length === 0, installRoot, problems, fixes };
}
