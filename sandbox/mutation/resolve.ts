// How the mutation run finds the workspace modules between a test file and the sources: TypeScript's
// module resolution with the workspace's tsconfig (its `paths` aliases included), so that a test
// importing `@app/x.ts` gets the copy of `src/x.ts` as one importing `../src/x.ts` does.
import { posix } from 'node:path';
import ts from 'typescript';
import { insideBox } from '../box.ts';
import type { ModuleAccess } from './copies.ts';

/** Compiler options of the workspace's tsconfig.json (none when it has none or it does not parse). */
function workspaceOptions(workspaceDir: string): ts.CompilerOptions {
  const file = posix.join(workspaceDir, 'tsconfig.json');
  if (!ts.sys.fileExists(file)) return {};
  const read = ts.readConfigFile(file, ts.sys.readFile);
  if (read.error) return {};
  return ts.parseJsonConfigFileContent(read.config, ts.sys, workspaceDir, undefined, file).options;
}

/** Module access over a workspace folder: reads its files, resolves specifiers as TypeScript does. */
export function workspaceModules(workspaceDir: string): ModuleAccess {
  const options: ts.CompilerOptions = {
    ...workspaceOptions(workspaceDir),
    allowJs: true,
    allowImportingTsExtensions: true,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    module: ts.ModuleKind.ESNext,
    noEmit: true,
  };
  const host: ts.ModuleResolutionHost = {
    ...ts.sys,
    fileExists: (p) => ts.sys.fileExists(p),
    readFile: (p) => ts.sys.readFile(p),
  };
  const root = workspaceDir.endsWith('/') ? workspaceDir : `${workspaceDir}/`;
  return {
    read(path) {
      try {
        return ts.sys.readFile(insideBox(workspaceDir, path)) ?? null;
      } catch {
        return null;
      }
    },
    resolve(spec, from) {
      const r = ts.resolveModuleName(spec, posix.join(workspaceDir, from), options, host).resolvedModule;
      if (!r || r.isExternalLibraryImport) return null;
      const abs = posix.normalize(r.resolvedFileName);
      // The resolution may pick a declaration file or leave the workspace: neither is a copy.
      if (!abs.startsWith(root) || /\.d\.[cm]?ts$/.test(abs)) return null;
      return abs.slice(root.length);
    },
  };
}
