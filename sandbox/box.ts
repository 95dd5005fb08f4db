import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, realpath, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import { type BoxStorageOptions, prepareBoxStorage, releaseBoxStorage } from './box-storage.ts';

const execFileAsync = promisify(execFile);

/** Top-level entries never copied into a box: heavy read-only trees are linked, VCS data is left out. */
const LINKED = new Set(['node_modules']);
const SKIPPED = new Set(['.git']);
/** Cache folders inside node_modules that tools write: each box gets its own (empty) instead. */
const BOX_CACHES = new Set(['.vite', '.vite-temp', '.cache']);

export interface Box {
  /** Absolute path of the box (the copy of the workspace). */
  dir: string;
  /** Real paths the box links to read-only (its node_modules); the backend must bind them. */
  linked: string[];
  /** Removes the box, whatever happened inside (never follows symlinks out of it). */
  dispose(): Promise<void>;
}

export interface CreateBoxOptions {
  /** The workspace (a built checkout) to clone. */
  workspace: string;
  /** Directory that holds boxes. */
  boxesDir?: string;
  /** Files written over the clone: workspace-relative path → content. */
  overlay?: Record<string, string>;
  /** Where the box's files live (a tmpfs of its own when root on Linux; see box-storage.ts). */
  storage?: BoxStorageOptions;
}

/** The copy-on-write clone command for this platform: reflinks on Linux (btrfs/xfs), clonefile on APFS. */
export function cloneArgv(platform: NodeJS.Platform, sources: string[], dest: string): string[] {
  return platform === 'darwin'
    ? ['/bin/cp', '-c', '-R', '-p', ...sources, `${dest}/`]
    : ['cp', '-a', '--reflink=auto', ...sources, `${dest}/`];
}

/** Resolves a workspace-relative path inside `root`, refusing anything that leaves it. */
export function insideBox(root: string, rel: string): string {
  const full = resolve(root, rel);
  const back = relative(root, full);
  if (back === '' || back.startsWith('..') || back.startsWith(sep) || rel.startsWith('/'))
    throw new Error(`path ${rel} leaves the box`);
  return full;
}

/**
 * Clones the workspace into a fresh box: every top-level entry copied copy-on-write, node_modules
 * linked (not copied) to the workspace's real node_modules, `.git` left out, then the overlay (the
 * candidate) written over its targets. The box also gets private `.home` and `.tmp` folders.
 */
export async function createBox(options: CreateBoxOptions): Promise<Box> {
  const workspace = await realpath(options.workspace);
  const wanted = options.boxesDir ?? join(tmpdir(), 'vtnode-boxes');
  await mkdir(wanted, { recursive: true, mode: 0o755 });
  const boxesDir = await realpath(wanted);
  // The creator's pid is in the name, so boxes left by a killed scorer can be swept (sweepStaleBoxes).
  const dir = join(boxesDir, `box-${process.pid}-${randomBytes(8).toString('hex')}`);
  await mkdir(dir, { mode: 0o700 });
  await prepareBoxStorage(dir, options.storage);
  const dispose = async () => {
    await releaseBoxStorage(dir);
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  };
  try {
    const entries = await readdir(workspace);
    const copied = entries.filter((e) => !LINKED.has(e) && !SKIPPED.has(e)).map((e) => join(workspace, e));
    if (copied.length > 0) {
      const [cmd, ...args] = cloneArgv(process.platform, copied, dir);
      await execFileAsync(cmd!, args);
    }
    const linked: string[] = [];
    for (const e of entries.filter((x) => LINKED.has(x))) {
      const real = await realpath(join(workspace, e));
      // A real folder of per-entry links, not one link: tools write caches beside the packages
      // (vite bundles vitest.config.ts into node_modules/.vite-temp), and those must land in the box.
      await mkdir(join(dir, e), { mode: 0o755 });
      for (const pkg of await readdir(real)) {
        if (!BOX_CACHES.has(pkg)) await symlink(join(real, pkg), join(dir, e, pkg));
      }
      linked.push(real);
    }
    for (const [rel, content] of Object.entries(options.overlay ?? {})) {
      const target = insideBox(dir, rel);
      // Refuse to write through a symlinked parent or target planted in the workspace.
      const parent = dirname(target);
      await mkdir(parent, { recursive: true });
      if ((await realpath(parent)) !== parent) throw new Error(`target ${rel}: a parent folder is a symlink`);
      const st = await lstat(target).catch(() => null);
      if (st) await unlink(target);
      await writeFile(target, content, { flag: 'wx', mode: 0o644 });
    }
    await mkdir(join(dir, '.home'), { mode: 0o700 });
    await mkdir(join(dir, '.tmp'), { mode: 0o700 });
    await chmod(dir, 0o755);
    return { dir, linked, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/**
 * Removes boxes whose creating process is gone (a scorer killed before its cleanup ran). Boxes of live
 * scorers, including other processes sharing the folder, are left alone. Returns the removed paths.
 */
export async function sweepStaleBoxes(boxesDir = join(tmpdir(), 'vtnode-boxes')): Promise<string[]> {
  const entries = await readdir(boxesDir).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of entries) {
    const m = /^box-(\d+)-[0-9a-f]+$/.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    let alive = true;
    try {
      process.kill(pid, 0);
    } catch (err) {
      alive = (err as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (alive) continue;
    await releaseBoxStorage(join(boxesDir, name));
    await rm(join(boxesDir, name), { recursive: true, force: true });
    removed.push(join(boxesDir, name));
  }
  return removed;
}
