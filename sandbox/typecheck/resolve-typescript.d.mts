/** A TypeScript installation a type-check runs under. */
export interface ResolvedTypescript {
  /** Real path of the module `require('typescript')` loads (lib/typescript.js). */
  modulePath: string;
  /** Real path of the package folder (bound read-only into the service's sandbox). */
  packageDir: string;
  /** The package's version (part of the service's key and of the answer). */
  version: string;
  /** The workspace's own TypeScript, or vtnode's fallback when the workspace has none. */
  source: 'workspace' | 'vtnode';
}

/** Resolves TypeScript from `fromDir` (the tsconfig's folder) like Node would, else vtnode's own. */
export function resolveTypescript(fromDir: string): ResolvedTypescript;
