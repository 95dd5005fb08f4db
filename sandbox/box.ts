import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmod,
  lchown,
  lstat,
  mkdir,
  readdir,
  realpath,
  rm,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import { type BoxPlan, boxLayout, scanWorkspace, type WorkspaceScan } from './box-layout.ts';
import { type BoxStorageOptions, prepareBoxStorage, releaseBoxStorage } from './box-storage.ts';
import { pidAlive } from './pid.ts';

const execFileAsync = promisify(execFile);

export interface Box {
  /** Absolute path of the box's copy of the workspace: the run's working directory and its only writable folder. */
  dir: string;
  /**
   * Absolute path of the box folder: `dir` itself, or the folder mirroring the install root that `dir`
   * sits in when the workspace is a member of a monorepo (see box-layout.ts). Removed by dispose().
   */
  root: string;
  /** Real paths the run must see read-only (node_modules, linked packages, `root` when it is not `dir`). */
  linked: string[];
  /** Removes the box, whatever happened inside (never follows symlinks out of it). */
  dispose(): Promise<void>;
  /** Writes files over the box's workspace copy (workspace-relative path → content), like the creation overlay. */
  write(overlay: Record<string, string>): Promise<void>;
}

export interface CreateBoxOptions {
  /** The workspace (a built checkout) to clone. */
  workspace: string;
  /** Directory that holds boxes. */
  boxesDir?: string;
  /** Files written over the clone: workspace-relative path → content. */
  overlay?: Record<string, string>;
  /** The workspace as scanned by scanWorkspace() (scanned now when absent; pass one to reuse it). */
  scan?: WorkspaceScan;
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
 * Clones the workspace into a fresh box laid out by boxLayout(): the workspace's files copy-on-write
 * (`.git` left out), its node_modules and every ancestor's up to the install root as folders of links
 * (never copied), the install root's config files; then the overlay (the candidate) written over its
 * targets. The box's workspace copy also gets private `.home` and `.tmp` folders.
 */
export async function createBox(options: CreateBoxOptions): Promise<Box> {
  const scan = options.scan ?? (await scanWorkspace(options.workspace));
  const wanted = options.boxesDir ?? join(tmpdir(), 'vtnode-boxes');
  await mkdir(wanted, { recursive: true, mode: 0o755 });
  const boxesDir = await realpath(wanted);
  // The creator's pid is in the name, so boxes left by a killed scorer can be swept (sweepStaleBoxes).
  const root = join(boxesDir, `box-${process.pid}-${randomBytes(8).toString('hex')}`);
  await mkdir(root, { mode: 0o700 });
  await prepareBoxStorage(root, options.storage);
  const dispose = async () => {
    await releaseBoxStorage(root);
    await rm(root, { recursive: true, force: true, maxRetries: 3 });
  };
  try {
    const plan = boxLayout(scan, root);
    await materialize(plan, root);
    const dir = plan.workspaceDir === '' ? root : join(root, plan.workspaceDir);
    await writeOverlay(dir, options.overlay ?? {});
    await mkdir(join(dir, '.home'), { mode: 0o700 });
    await mkdir(join(dir, '.tmp'), { mode: 0o700 });
    await chmod(root, 0o755);
    return {
      dir,
      root,
      linked: dir === root ? plan.readOnly : [...plan.readOnly, root],
      dispose,
      write: (overlay) => writeOverlay(dir, overlay),
    };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/** Executes a box plan under `root`: folders, copy-on-write clones (one `cp` per folder), links. */
export async function materialize(plan: BoxPlan, root: string): Promise<void> {
  for (const d of plan.dirs) await mkdir(join(root, d), { mode: 0o755 });
  const byFolder = new Map<string, string[]>();
  for (const c of plan.clones) byFolder.set(c.into, [...(byFolder.get(c.into) ?? []), c.from]);
  for (const [into, sources] of byFolder) {
    const [cmd, ...args] = cloneArgv(process.platform, sources, join(root, into));
    await execFileAsync(cmd!, args);
  }
  for (const l of plan.links) await symlink(l.target, insideBox(root, l.path));
}

/** Writes the candidate files, never through a symlinked parent or target planted in the workspace. */
async function writeOverlay(dir: string, overlay: Record<string, string>): Promise<void> {
  for (const [rel, content] of Object.entries(overlay)) {
    const target = insideBox(dir, rel);
    const parent = dirname(target);
    await mkdir(parent, { recursive: true });
    if ((await realpath(parent)) !== parent) throw new Error(`target ${rel}: a parent folder is a symlink`);
    const st = await lstat(target).catch(() => null);
    if (st) await unlink(target);
    await writeFile(target, content, { flag: 'wx', mode: 0o644 });
  }
}

/**
 * Gives `dir` and everything under it to `uid` (group too), links themselves and never what they point
 * at, as `chown -R -P` does. In the scorer rather than a `chown` process: a spawn costs the scorer more
 * CPU than walking a box does.
 */
export async function chownTree(dir: string, uid: number): Promise<void> {
  await lchown(dir, uid, uid);
  const entries = await readdir(dir, { withFileTypes: true });
  await Promise.all(
    entries.map((e) =>
      e.isDirectory() ? chownTree(join(dir, e.name), uid) : lchown(join(dir, e.name), uid, uid),
    ),
  );
}

/** The run's working directory in a box: the workspace copy, or the judge's `cwd` inside it. */
export function boxCwd(box: Pick<Box, 'dir'>, judgeCwd?: string): string {
  return judgeCwd === undefined || judgeCwd === '.' ? box.dir : insideBox(box.dir, judgeCwd);
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
    if (pidAlive(pid)) continue;
    await releaseBoxStorage(join(boxesDir, name));
    await rm(join(boxesDir, name), { recursive: true, force: true });
    removed.push(join(boxesDir, name));
  }
  return removed;
}
