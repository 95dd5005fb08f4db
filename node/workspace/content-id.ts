import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Folders never part of a workspace's identity when the tree is not under git. */
const UNTRACKED_DIRS = new Set(['node_modules', '.git', 'dist', 'coverage', '.vtnode']);

export interface WorkspaceIdentity {
  /** `sha256:` + hex: hash over (path, sha256(content)) of every tracked file, sorted by path. */
  id: string;
  /** HEAD commit, or null outside git. */
  commit: string | null;
  /** False when git reports uncommitted changes, or the tree is not a git tree. */
  clean: boolean;
  /** The files that went into the id, sorted, workspace-relative POSIX paths. */
  files: string[];
}

async function git(root: string, args: string[]): Promise<string | null> {
  try {
    const { stdout } = await run('git', ['-C', root, ...args], { maxBuffer: 256 * 1024 * 1024 });
    return stdout;
  } catch {
    return null;
  }
}

async function walk(root: string, dir: string, out: string[]): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!UNTRACKED_DIRS.has(entry.name)) await walk(root, join(dir, entry.name), out);
    } else if (entry.isFile()) {
      out.push(relative(root, join(dir, entry.name)).split(sep).join('/'));
    }
  }
}

function hashFile(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(path)
      .on('data', (chunk) => h.update(chunk))
      .on('end', () => resolve(h.digest('hex')))
      .on('error', reject);
  });
}

/**
 * The content id of a workspace (a built checkout): the same id the miner records on every task and
 * a node advertises for the workspaces it holds. Tracked files only under git (the working-tree
 * content, so an uncommitted edit changes the id); every file but build and dependency folders otherwise.
 */
export async function workspaceIdentity(root: string): Promise<WorkspaceIdentity> {
  const info = await stat(root).catch(() => null);
  if (!info?.isDirectory()) throw new Error(`workspace ${root}: not a directory`);
  const top = (await git(root, ['rev-parse', '--show-toplevel']))?.trim();
  let files: string[];
  let commit: string | null = null;
  let clean = false;
  if (top !== undefined) {
    const listed = (await git(root, ['ls-files', '-z', '--cached', '--', '.'])) ?? '';
    // ls-files prints paths relative to the directory it runs in, i.e. to the workspace root.
    files = listed.split('\0').filter(Boolean);
    commit = (await git(root, ['rev-parse', 'HEAD']))?.trim() || null;
    const status = await git(root, ['status', '--porcelain', '--', '.']);
    clean = commit !== null && status !== null && status.trim() === '';
  } else {
    files = [];
    await walk(root, root, files);
  }
  // Hash files concurrently (bounded): a large repository is I/O-bound, not CPU-bound.
  const sorted = files.sort();
  const hashes: (string | null)[] = new Array(sorted.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < sorted.length) {
      const i = next++;
      const full = join(root, sorted[i]!);
      const st = await stat(full).catch(() => null);
      if (st?.isFile()) hashes[i] = await hashFile(full); // else: deleted in the working tree
    }
  };
  await Promise.all(Array.from({ length: Math.min(32, sorted.length) }, worker));
  const present: string[] = [];
  const h = createHash('sha256');
  for (const [i, file] of sorted.entries()) {
    if (hashes[i] === null) continue;
    present.push(file);
    h.update(`${file}\0${hashes[i]}\n`);
  }
  return { id: `sha256:${h.digest('hex')}`, commit, clean, files: present };
}

/** Just the content id (what scorers and adverts need). */
export async function workspaceId(root: string): Promise<string> {
  return (await workspaceIdentity(root)).id;
}
