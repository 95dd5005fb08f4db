import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Folders never mined: dependencies, VCS data, build output. */
const NEVER = new Set(['node_modules', '.git', 'dist', 'build', 'coverage', '.vtnode', '.next', 'out']);

/** Extensions of files the miner parses. */
export const CODE_EXTENSIONS = ['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs'] as const;

/** True for a TS/JS file the miner parses (declaration files `.d.ts` are not code to write). */
export function isCodeFile(path: string): boolean {
  if (/\.d\.[cm]?ts$/.test(path)) return false;
  return CODE_EXTENSIONS.some((ext) => path.endsWith(ext));
}

async function walk(root: string, dir: string, out: string[]): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!NEVER.has(entry.name)) await walk(root, join(dir, entry.name), out);
    } else if (entry.isFile()) {
      out.push(relative(root, join(dir, entry.name)).split(sep).join('/'));
    }
  }
}

/**
 * Every file of the workspace, workspace-relative POSIX paths, sorted. Under git: tracked files plus
 * untracked files that are not ignored (so a tree being edited mines what is on disk; the workspace is
 * then recorded as unclean). Outside git: every file except dependency and build folders.
 */
export async function listWorkspaceFiles(root: string): Promise<string[]> {
  let files: string[] | null = null;
  try {
    const { stdout } = await run(
      'git',
      ['-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
      {
        maxBuffer: 512 * 1024 * 1024,
      },
    );
    files = stdout.split('\0').filter(Boolean);
  } catch {
    files = null;
  }
  if (files === null) {
    files = [];
    await walk(root, root, files);
  }
  return [...new Set(files)].filter((f) => !f.split('/').some((seg) => NEVER.has(seg))).sort();
}
