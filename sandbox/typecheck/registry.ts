import { realpathSync } from 'node:fs';
import { createTypecheckService, type TypecheckService, type TypecheckServiceOptions } from './client.ts';
import { tsconfigDir } from './paths.ts';
import { resolveTypescript } from './resolve-typescript.mjs';

/**
 * The `tsc` arguments of a judge's type-check command when the service can answer for it: `[npx …] tsc
 * … --noEmit …` (or a path to tsc), without `--build` or `--watch`. Null for anything else: the caller
 * runs that command as before. (The service validates the arguments fully with the workspace's own
 * TypeScript and answers `error` for what it cannot serve.)
 */
export function tscArgsOf(argv: string[]): string[] | null {
  let rest = argv;
  if (rest[0] === 'npx') {
    rest = rest.slice(1);
    while (rest[0]?.startsWith('-')) rest = rest.slice(1);
  }
  const program = rest[0];
  if (!program || !/(?:^|\/)tsc(?:\.js)?$/.test(program)) return null;
  const args = rest.slice(1);
  const lower = args.map((a) => a.toLowerCase());
  if (!lower.includes('--noemit')) return null;
  if (lower.some((a) => ['-b', '--build', '-w', '--watch'].includes(a))) return null;
  return args;
}

/** Type-check services shared by every task of a scorer, one per (workspace content, tsconfig, TypeScript). */
export interface TypecheckRegistry {
  /**
   * The service for a judge's type-check command in a workspace, or null when the command is not one it
   * serves (see tscArgsOf). `workspaceId` (the content id) retires a service whose workspace changed.
   */
  serviceFor(workspaceDir: string, argv: string[], workspaceId?: string): TypecheckService | null;
  /** Stops every service. */
  close(): Promise<void>;
}

/** Options shared by every service the registry creates. */
export type TypecheckRegistryOptions = Omit<TypecheckServiceOptions, 'workspaceDir' | 'tscArgs'>;

export function createTypecheckRegistry(options: TypecheckRegistryOptions): TypecheckRegistry {
  const services = new Map<string, { content: string; service: TypecheckService }>();
  return {
    serviceFor(workspaceDir, argv, workspaceId = '') {
      const tscArgs = tscArgsOf(argv);
      if (!tscArgs) return null;
      const dir = realpathSync(workspaceDir);
      const ts = resolveTypescript(tsconfigDir(dir, tscArgs));
      const key = JSON.stringify([dir, tscArgs, ts.modulePath, ts.version]);
      const known = services.get(key);
      if (known && known.content === workspaceId) return known.service;
      if (known) void known.service.close();
      const service = createTypecheckService({ ...options, workspaceDir: dir, tscArgs });
      services.set(key, { content: workspaceId, service });
      return service;
    },
    async close() {
      const all = [...services.values()];
      services.clear();
      await Promise.all(all.map((s) => s.service.close()));
    },
  };
}
