import { readFile, realpath } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { z } from 'zod';
import { packageVersion } from './package.ts';

/** The runner a judge needs is not installed where the run resolves packages: an infrastructure error. */
export class RunnerMissingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunnerMissingError';
  }
}

const PackageJson = z.object({
  version: z.string().optional(),
  bin: z.union([z.string(), z.record(z.string(), z.string())]).optional(),
});
export type RunnerPackageJson = z.infer<typeof PackageJson>;

/** The folders whose node_modules node searches from `cwd`, nearest first, never above `box`. */
export function searchDirs(box: string, cwd: string): string[] {
  const back = relative(box, cwd);
  if (back.startsWith('..') || back.startsWith(sep))
    throw new Error(`cwd ${cwd} is not inside the box ${box}`);
  const dirs = [cwd];
  for (let d = cwd; d !== box; ) {
    d = dirname(d);
    dirs.push(d);
  }
  return dirs;
}

/** An installed runner package: its real directory and its package.json. */
export interface RunnerPackage {
  dir: string;
  json: RunnerPackageJson;
}

/**
 * Finds `pkg` the way node resolves it from `cwd` (the nearest `node_modules/<pkg>`, walking up to the
 * box root). Throws RunnerMissingError naming the package and where it looked.
 */
export async function findRunnerPackage(box: string, cwd: string, pkg: string): Promise<RunnerPackage> {
  const dirs = searchDirs(box, cwd);
  for (const d of dirs) {
    const manifest = join(d, 'node_modules', pkg, 'package.json');
    const text = await readFile(manifest, 'utf8').catch(() => null);
    if (text === null) continue;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new RunnerMissingError(`${manifest} is not JSON (${(err as Error).message})`);
    }
    const parsed = PackageJson.safeParse(raw);
    if (!parsed.success)
      throw new RunnerMissingError(`${manifest}: ${parsed.error.issues[0]?.path.join('.')} is malformed`);
    return { dir: await realpath(dirname(manifest)), json: parsed.data };
  }
  const where = dirs.map((d) => relative(box, d) || '.').join(', ');
  throw new RunnerMissingError(
    `${pkg} is not installed in the workspace (no node_modules/${pkg} in ${where}): install the workspace's dependencies (npm ci) before scoring`,
  );
}

/** The real path of a file of an installed runner package; throws RunnerMissingError when absent. */
export async function runnerFile(pkg: RunnerPackage, name: string, rel: string): Promise<string> {
  const full = join(pkg.dir, rel);
  try {
    return await realpath(full);
  } catch {
    throw new RunnerMissingError(`${name} in ${pkg.dir} has no ${rel} (a broken install?)`);
  }
}

/** The path of a package's bin (`bin` as a string, or the entry named `name`), relative to the package. */
export function binOf(json: RunnerPackageJson, name: string): string | null {
  if (typeof json.bin === 'string') return json.bin;
  return json.bin?.[name] ?? null;
}

/** `pkg@version` of the runner installed for `cwd` (default: the box root). */
export async function runnerVersion(box: string, pkg: string, cwd = box): Promise<string> {
  // From a workspace (not a box), hoisted packages live above it, up to the install root.
  const resolved = await packageVersion(cwd, pkg);
  if (resolved) return resolved;
  const found = await findRunnerPackage(box, cwd, pkg);
  return `${pkg}@${found.json.version ?? 'unknown'}`;
}
