import { readFile, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { findInstallRoot } from '../install-root.ts';
import { resolvePackageDir } from '../workspace-ready.ts';

/**
 * `name@version` of a package as Node resolves it from `dir` (its node_modules, then every ancestor's up
 * to the install root: hoisted dependencies of a monorepo member count), or null when it is not there.
 */
export async function packageVersion(dir: string, name: string): Promise<string | null> {
  const real = await realpath(dir).catch(() => null);
  if (!real) return null;
  const pkgDir = resolvePackageDir(real, name, findInstallRoot(real));
  if (!pkgDir) return null;
  try {
    const json = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8')) as { version?: unknown };
    return `${name}@${typeof json.version === 'string' ? json.version : 'unknown'}`;
  } catch {
    return `${name}@unknown`;
  }
}
