// Which TypeScript a type-check uses: the workspace's own (resolved from the tsconfig's folder, the way
// `npx tsc` there would find it), else vtnode's own as a fallback. Shared by the client (which binds the
// package read-only into the service's sandbox and keys services by version) and the service (which
// loads it). Plain JS: the service runs from vtnode's folder, possibly under node_modules, where Node
// does not strip types.
import { readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * @param {string} fromDir folder the resolution starts from (the tsconfig's folder)
 * @returns {{ modulePath: string, packageDir: string, version: string, source: 'workspace' | 'vtnode' }}
 */
export function resolveTypescript(fromDir) {
  const own = tryResolve(createRequire(join(fromDir, 'noop.js')));
  if (own) return { ...own, source: 'workspace' };
  const fallback = tryResolve(createRequire(import.meta.url));
  if (fallback) return { ...fallback, source: 'vtnode' };
  throw new Error(`typescript is installed neither in ${fromDir} (or above) nor next to vtnode`);
}

/** @param {NodeJS.Require} req */
function tryResolve(req) {
  let modulePath;
  try {
    modulePath = realpathSync(req.resolve('typescript'));
  } catch {
    return null;
  }
  // lib/typescript.js → the package folder (two levels up), whose package.json names the version.
  const packageDir = dirname(dirname(modulePath));
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
  if (pkg.name !== 'typescript' || typeof pkg.version !== 'string')
    throw new Error(`${packageDir}/package.json does not describe the typescript package`);
  return { modulePath, packageDir, version: pkg.version };
}
