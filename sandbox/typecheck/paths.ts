import { lstat, readdir, readlink, realpath } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dedupePaths } from '../bwrap.ts';
import type { ResolvedTypescript } from './resolve-typescript.mjs';

/** The service's entry point and the folder of its modules (bound read-only into its sandbox). */
export const SERVICE_ENTRY = fileURLToPath(new URL('./service.mjs', import.meta.url));
export const SERVICE_DIR = dirname(SERVICE_ENTRY);

/** The tsconfig folder `tsc <args>` run in `workspaceDir` would use (`-p X`, else the workspace). */
export function tsconfigDir(workspaceDir: string, tscArgs: string[]): string {
  const at = tscArgs.findIndex((a) => a === '-p' || a.toLowerCase() === '--project');
  const project = at >= 0 ? tscArgs[at + 1] : undefined;
  if (project === undefined) return workspaceDir;
  const full = resolve(workspaceDir, project);
  return /\.json$/i.test(full) ? dirname(full) : full;
}

/** `dir` and every folder above it. */
function ancestors(dir: string): string[] {
  const out = [dir];
  for (let d = dirname(dir); d !== out.at(-1); d = dirname(d)) out.push(d);
  return out;
}

/**
 * `path`, every path its chain of symlinks passes through, and its real path. Inside the sandbox a
 * path is looked up literally, so each hop must be bound (binding a symlink mounts its target there):
 * `ws/node_modules → /repo/node_modules → /store/node_modules` needs all three.
 */
async function symlinkHops(path: string): Promise<string[]> {
  const out = [path];
  let current = path;
  for (let i = 0; i < 40; i++) {
    if (!(await lstat(current).catch(() => null))?.isSymbolicLink()) break;
    current = resolve(dirname(current), await readlink(current));
    out.push(current);
  }
  const real = await realpath(path).catch(() => null);
  return real ? [...out, real] : [];
}

/**
 * Real paths of the packages a node_modules folder links to elsewhere (workspace packages of a
 * monorepo, a pnpm store outside the folder): module resolution follows those links.
 */
async function linkedPackages(nodeModules: string): Promise<string[]> {
  const entries = await readdir(nodeModules).catch(() => [] as string[]);
  const names = (
    await Promise.all(
      entries.map(async (e) =>
        e.startsWith('@')
          ? (await readdir(join(nodeModules, e)).catch(() => [] as string[])).map((s) => join(e, s))
          : [e],
      ),
    )
  ).flat();
  const links = await Promise.all(
    names.map(async (n) => {
      const p = join(nodeModules, n);
      return (await lstat(p).catch(() => null))?.isSymbolicLink() ? realpath(p).catch(() => null) : null;
    }),
  );
  return links.filter((p): p is string => p !== null && !p.startsWith(`${nodeModules}/`));
}

/**
 * What the service reads: the workspace (at the path it is given and its real path), every node_modules its tsconfig folder and root resolve
 * through (up to the file-system root, as Node and tsc look) with the packages they link to, the
 * TypeScript it runs, the node toolchain and the service's own modules. Real paths, deduplicated.
 */
export async function serviceReadOnlyPaths(options: {
  workspaceDir: string;
  configDir: string;
  typescript: ResolvedTypescript;
  node: string;
  extra: string[];
}): Promise<string[]> {
  const paths = [
    ...(await symlinkHops(options.workspaceDir)),
    options.typescript.packageDir,
    dirname(dirname(options.node)),
    SERVICE_DIR,
    ...options.extra,
  ];
  const dirs = new Set([...ancestors(options.configDir), ...ancestors(options.workspaceDir)]);
  for (const dir of dirs) {
    const hops = await symlinkHops(join(dir, 'node_modules'));
    const real = hops.at(-1);
    if (real) paths.push(...hops, ...(await linkedPackages(real)));
  }
  return dedupePaths(paths);
}
