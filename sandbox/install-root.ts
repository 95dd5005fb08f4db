import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { z } from 'zod';

/** The package.json fields that say where a workspace's members are. */
const WorkspacesField = z.object({
  workspaces: z
    .union([z.array(z.string()), z.object({ packages: z.array(z.string()).optional() })])
    .optional(),
});

/** Converts a workspace glob (`packages/*`, `apps/**`, `tools/cli`) to a RegExp over directory paths. */
export function workspaceGlob(pattern: string): RegExp {
  const clean = pattern.replace(/^\.\//, '').replace(/\/+$/, '');
  const src = clean
    .split('/')
    .map((seg) => (seg === '**' ? '.*' : seg.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')))
    .join('/');
  return new RegExp(`^${src}$`);
}

/** The `packages:` list of a pnpm-workspace.yaml (`- 'packages/*'` lines under it). */
export function pnpmWorkspacePatterns(yaml: string): string[] {
  const out: string[] = [];
  let inPackages = false;
  for (const line of yaml.split('\n')) {
    if (/^packages\s*:/.test(line)) inPackages = true;
    else if (/^\S/.test(line)) inPackages = false;
    else if (inPackages) {
      const m = /^\s*-\s*['"]?([^'"#]+?)['"]?\s*(#.*)?$/.exec(line);
      if (m?.[1]) out.push(m[1]);
    }
  }
  return out;
}

/**
 * Member patterns declared at `dir`: package.json `workspaces` (npm, yarn) and pnpm-workspace.yaml.
 * An unreadable or malformed package.json declares none.
 */
export function workspacePatternsAt(dir: string): string[] {
  const out: string[] = [];
  const pkgPath = join(dir, 'package.json');
  if (existsSync(pkgPath)) {
    let raw: unknown = null;
    try {
      raw = JSON.parse(readFileSync(pkgPath, 'utf8'));
    } catch {
      raw = null;
    }
    const parsed = WorkspacesField.safeParse(raw);
    const ws = parsed.success ? parsed.data.workspaces : undefined;
    out.push(...(Array.isArray(ws) ? ws : (ws?.packages ?? [])));
  }
  const pnpm = join(dir, 'pnpm-workspace.yaml');
  if (existsSync(pnpm)) out.push(...pnpmWorkspacePatterns(readFileSync(pnpm, 'utf8')));
  return out;
}

/** True when `rel` (a directory relative to the workspace root) is a member by `patterns` (`!x` excludes). */
export function isWorkspaceMember(patterns: readonly string[], rel: string): boolean {
  const include = patterns.filter((p) => !p.startsWith('!')).map(workspaceGlob);
  const exclude = patterns.filter((p) => p.startsWith('!')).map((p) => workspaceGlob(p.slice(1)));
  return include.some((re) => re.test(rel)) && !exclude.some((re) => re.test(rel));
}

/**
 * The directory dependencies were installed from for the package at `dir` (a real path): the nearest
 * ancestor whose workspaces (package.json `workspaces`, pnpm-workspace.yaml) list `dir` as a member,
 * else `dir` itself. A lockfile alone never makes an ancestor the install root: a stray
 * ~/package-lock.json must not pull the home folder into a box.
 */
export function findInstallRoot(dir: string): string {
  for (let up = dirname(dir); ; up = dirname(up)) {
    const rel = relative(up, dir).split(sep).join('/');
    const patterns = workspacePatternsAt(up);
    if (patterns.length > 0 && isWorkspaceMember(patterns, rel)) return up;
    if (dirname(up) === up) return dir;
  }
}

/** Lockfiles at an install root, and the command that installs exactly what they pin. */
export const INSTALL_COMMANDS: readonly { lockfile: string; manager: string; command: string }[] = [
  { lockfile: 'pnpm-lock.yaml', manager: 'pnpm', command: 'pnpm install --frozen-lockfile' },
  { lockfile: 'yarn.lock', manager: 'yarn', command: 'yarn install --frozen-lockfile' },
  { lockfile: 'package-lock.json', manager: 'npm', command: 'npm ci' },
  { lockfile: 'npm-shrinkwrap.json', manager: 'npm', command: 'npm ci' },
];

/** The install command for the install root `root` (by its lockfile; `npm install` without one). */
export function installCommand(root: string): { manager: string; command: string } {
  const found = INSTALL_COMMANDS.find((c) => existsSync(join(root, c.lockfile)));
  return found ?? { manager: 'npm', command: 'npm install' };
}
