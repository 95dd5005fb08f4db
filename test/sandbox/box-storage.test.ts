// A box's storage: its own tmpfs as root (sealed at a run's quota, unmounted on dispose, swept after a
// killed scorer), a plain folder walked by sampling otherwise.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import {
  chmod,
  link,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  rm,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chownTree, createBox, sweepStaleBoxes } from '../../sandbox/box.ts';
import {
  BOX_MOUNT_SOURCE,
  prepareBoxStorage,
  releaseBoxStorage,
  treeUsage,
  watchBoxStorage,
} from '../../sandbox/box-storage.ts';
import { scratchFolders } from '../../sandbox/bwrap.ts';
import { listProcesses, readMounts } from '../../sandbox/procfs.ts';
import { REPO_ROOT } from './fixtures.ts';

const MiB = 1024 ** 2;
const isRoot = process.getuid?.() === 0;
const quota = { diskBytes: 4 * MiB, inodes: 50, fileSizeBytes: MiB };
let root: string;

const mounted = async (dir: string) =>
  (await readMounts()).some((m) => m.mountPoint === dir && m.source === BOX_MOUNT_SOURCE);

/** Resolves once `child` printed a line (it is then ready); rejects if it exits first. */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (d: Buffer) => {
      text += d;
      if (text.includes('\n')) resolve(text.trim());
    });
    child.once('exit', (code) => reject(new Error(`exited ${code} before it was ready`)));
  });
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'vtnode-storage-test-'));
});
afterEach(async () => {
  for (const name of await readdir(root).catch(() => [] as string[]))
    await releaseBoxStorage(join(root, name));
  await rm(root, { recursive: true, force: true });
});

describe.runIf(isRoot)('a tmpfs of its own (root)', () => {
  it('is mounted by prepare, unmounted by release (twice is harmless)', async () => {
    const dir = join(root, 'box');
    await mkdir(dir);
    expect(await prepareBoxStorage(dir)).toBe('tmpfs');
    expect(await mounted(dir)).toBe(true);
    await writeFile(join(dir, 'f'), 'x');
    await releaseBoxStorage(dir);
    await releaseBoxStorage(dir);
    expect(await mounted(dir)).toBe(false);
    expect(await readdir(dir)).toEqual([]);
  });

  it('falls back to a lazy unmount while something still holds the box', async () => {
    const dir = join(root, 'box');
    await mkdir(dir);
    await prepareBoxStorage(dir);
    const holder = spawn('/bin/sh', ['-c', 'echo ready; exec sleep 60'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    try {
      await firstLine(holder);
      await releaseBoxStorage(dir);
      expect(await mounted(dir)).toBe(false);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('is sealed at the quota: more is seen as exceeded, and refused past one file of grace', async () => {
    const dir = join(root, 'box');
    await mkdir(dir);
    await prepareBoxStorage(dir);
    await writeFile(join(dir, 'workspace-file'), Buffer.alloc(3 * MiB));
    const watch = await watchBoxStorage(dir, quota);
    expect(watch.kind).toBe('tmpfs');
    expect(await watch.exceeded?.(null)).toBeNull();
    await writeFile(join(dir, 'a'), Buffer.alloc(4 * MiB));
    expect(await watch.exceeded?.(null)).toBeNull();
    await writeFile(join(dir, 'b'), Buffer.alloc(64 * 1024));
    expect(await watch.exceeded?.(null)).toBe('disk');
    // The hard cap is the workspace + quota + one file (1 MiB): a second MiB no longer fits.
    await expect(writeFile(join(dir, 'c'), Buffer.alloc(2 * MiB))).rejects.toThrow(/ENOSPC/);
    expect((await watch.added()).bytes).toBeLessThanOrEqual(quota.diskBytes + quota.fileSizeBytes);
  });

  it('counts inodes, hard links included, and refuses one past the quota', async () => {
    const dir = join(root, 'box');
    await mkdir(dir);
    await prepareBoxStorage(dir);
    const watch = await watchBoxStorage(dir, quota);
    await writeFile(join(dir, 'origin'), '');
    for (let i = 0; i < 40; i++) await mkdir(join(dir, `d${i}`));
    for (let i = 0; i < 9; i++) await link(join(dir, 'origin'), join(dir, `l${i}`));
    expect(await watch.exceeded?.(null)).toBeNull();
    await writeFile(join(dir, 'one-more'), '');
    expect(await watch.exceeded?.(null)).toBe('inodes');
    await expect(writeFile(join(dir, 'refused'), '')).rejects.toThrow(/ENOSPC/);
  });

  it("a box is given to the run's uid: every entry and link, never what a link points at", async () => {
    const box = join(root, 'box');
    await mkdir(join(box, 'src', 'deep'), { recursive: true });
    await writeFile(join(box, 'src', 'deep', 'a.ts'), 'export {};\n');
    const outside = join(root, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'secret'), 'x');
    await symlink(outside, join(box, 'node_modules'));
    await symlink(join(outside, 'secret'), join(box, 'src', 'secret'));
    await chownTree(box, 61999);
    for (const p of ['', 'src', 'src/deep', 'src/deep/a.ts', 'node_modules', 'src/secret'])
      expect((await lstat(join(box, p))).uid, p).toBe(61999);
    for (const p of [outside, join(outside, 'secret')]) expect((await lstat(p)).uid, p).toBe(0);
  });

  it('a box left by a killed scorer is unmounted and removed by the next sweep', async () => {
    const boxesDir = join(root, 'boxes');
    const ws = join(root, 'ws');
    await mkdir(ws);
    await writeFile(join(ws, 'a.txt'), 'a');
    const script = `import { createBox } from ${JSON.stringify(join(REPO_ROOT, 'sandbox/box.ts'))};
const box = await createBox({ workspace: ${JSON.stringify(ws)}, boxesDir: ${JSON.stringify(boxesDir)} });
console.log(box.dir);
setInterval(() => {}, 1000);`;
    const scorer = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const dir = await firstLine(scorer);
    expect(await mounted(dir)).toBe(true);
    const gone = new Promise((r) => scorer.once('exit', r));
    scorer.kill('SIGKILL');
    await gone;
    expect(await sweepStaleBoxes(boxesDir)).toEqual([dir]);
    expect(await mounted(dir)).toBe(false);
    expect(existsSync(dir)).toBe(false);
  });

  it('createBox puts the workspace on the box tmpfs and dispose frees it', async () => {
    const ws = join(root, 'ws');
    await mkdir(join(ws, 'src'), { recursive: true });
    await writeFile(join(ws, 'src', 'a.ts'), 'a');
    const box = await createBox({ workspace: ws, boxesDir: join(root, 'boxes') });
    expect(await mounted(box.dir)).toBe(true);
    expect(existsSync(join(box.dir, 'src', 'a.ts'))).toBe(true);
    await box.dispose();
    expect(await mounted(box.dir)).toBe(false);
    expect(existsSync(box.dir)).toBe(false);
  });
});

describe('a plain folder (not root, or the mount refused)', () => {
  it('prepare leaves it a folder when asked, and release leaves it alone', async () => {
    const dir = join(root, 'box');
    await mkdir(dir);
    expect(await prepareBoxStorage(dir, { mode: 'directory' })).toBe('directory');
    await writeFile(join(dir, 'f'), 'x');
    await releaseBoxStorage(dir);
    expect(await readdir(dir)).toEqual(['f']);
  });

  it('is walked: bytes (hard links once), entries, and deleted files the run still holds', async () => {
    const dir = join(root, 'box');
    await mkdir(dir);
    await writeFile(join(dir, 'base'), 'workspace');
    const watch = await watchBoxStorage(dir, quota);
    expect(watch.kind).toBe('directory');
    await writeFile(join(dir, 'a'), Buffer.alloc(2 * MiB, 1));
    const added = await watch.added();
    expect(added.bytes).toBeGreaterThanOrEqual(2 * MiB);
    expect(added.inodes).toBe(1);
    // Open, unlink, keep writing: gone from the walk, still on the disk while a member holds it.
    const held = await open(join(dir, 'held'), 'w');
    try {
      await unlink(join(dir, 'held'));
      await held.write(Buffer.alloc(3 * MiB, 1));
      await held.sync();
      const me = (await listProcesses()).filter((p) => p.pid === process.pid);
      expect(await watch.exceeded?.(me)).toBe('disk');
    } finally {
      await held.close();
    }
  });

  it('sees an inode bomb, and stops walking it early', async () => {
    const dir = join(root, 'box');
    await mkdir(join(dir, 'many'), { recursive: true });
    const watch = await watchBoxStorage(dir, quota);
    for (let i = 0; i < 500; i++) await writeFile(join(dir, 'many', `f${i}`), '');
    expect(await watch.exceeded?.([])).toBe('inodes');
    const partial = await treeUsage(dir, { bytes: Number.POSITIVE_INFINITY, inodes: 100 });
    expect(partial.inodes).toBe(101);
  });

  it('a folder named like the scratch dirs but planted as a symlink is refused', async () => {
    const dir = join(root, 'box');
    await mkdir(dir);
    await chmod(dir, 0o755);
    const outside = join(root, 'outside');
    await mkdir(outside);
    await symlink(outside, join(dir, '.vtnode-sandbox'));
    await expect(scratchFolders(dir)).rejects.toThrow(/not a folder of the box/);
    expect(await readdir(outside)).toEqual([]);
  });
});
