import { lstat, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** A fetched workspace on disk, as the size cap sees it. */
export interface StoredWorkspace {
  id: string;
  /** Bytes on disk, dependencies and build output included. */
  bytes: number;
  /** When a job last used it (or it became ready), ms since epoch. */
  lastUsed: number;
}

/**
 * The workspaces to evict so that the rest, plus `incoming` bytes, fit `maxBytes`: least recently
 * used first, never one in `keep` (in use by a running job, or the one just fetched). `fits` is
 * false when even evicting all the others is not enough. Pure.
 */
export function chooseEvictions(
  stored: readonly StoredWorkspace[],
  options: { maxBytes: number; incoming: number; keep: ReadonlySet<string> },
): { evict: string[]; fits: boolean } {
  let total = options.incoming + stored.reduce((sum, w) => sum + w.bytes, 0);
  const evict: string[] = [];
  const candidates = stored
    .filter((w) => !options.keep.has(w.id))
    .sort((a, b) => a.lastUsed - b.lastUsed || (a.id < b.id ? -1 : 1));
  for (const w of candidates) {
    if (total <= options.maxBytes) break;
    evict.push(w.id);
    total -= w.bytes;
  }
  return { evict, fits: total <= options.maxBytes };
}

/** Bytes under `path` (files and symlinks themselves, not what links point to). */
export async function diskBytes(path: string): Promise<number> {
  const info = await lstat(path).catch(() => null);
  if (!info) return 0;
  if (!info.isDirectory()) return info.size;
  let sum = 0;
  for (const name of await readdir(path).catch(() => [] as string[]))
    sum += await diskBytes(join(path, name));
  return sum;
}

/** When the marker file at `path` was last touched, ms since epoch (0 when it is missing). */
export async function touchedAt(path: string): Promise<number> {
  return (await stat(path).catch(() => null))?.mtimeMs ?? 0;
}

/** Removes every file of a fetched workspace: its tree, its manifest and its ready marker. */
export async function removeWorkspaceFiles(root: string, manifest: string, ready: string): Promise<void> {
  await rm(ready, { force: true });
  await rm(manifest, { force: true });
  await rm(root, { recursive: true, force: true });
}
