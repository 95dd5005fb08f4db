import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { createBox, insideBox, sweepStaleBoxes } from '../../sandbox/box.ts';

let root: string;
let ws: string;
let boxesDir: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'vtnode-box-test-'));
  ws = join(root, 'ws');
  boxesDir = join(root, 'boxes');
  await mkdir(join(ws, 'src'), { recursive: true });
  await mkdir(join(ws, '.git'));
  await mkdir(join(root, 'deps', 'pkg'), { recursive: true });
  await mkdir(join(root, 'deps', '.vite-temp'), { recursive: true });
  await writeFile(join(ws, 'src', 'a.ts'), 'reference');
  await writeFile(join(ws, '.git', 'HEAD'), 'ref');
  await symlink(join(root, 'deps'), join(ws, 'node_modules'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

it('clones the workspace, links node_modules, leaves .git out and writes the overlay', async () => {
  const box = await createBox({
    workspace: ws,
    boxesDir,
    overlay: { 'src/a.ts': 'candidate', 'src/new/b.ts': 'b' },
  });
  try {
    expect(await readFile(join(box.dir, 'src', 'a.ts'), 'utf8')).toBe('candidate');
    expect(await readFile(join(box.dir, 'src', 'new', 'b.ts'), 'utf8')).toBe('b');
    expect(await readFile(join(ws, 'src', 'a.ts'), 'utf8')).toBe('reference');
    // node_modules is a folder of links into the real one, so tools can write their caches in the box.
    expect((await lstat(join(box.dir, 'node_modules'))).isDirectory()).toBe(true);
    expect(await readlink(join(box.dir, 'node_modules', 'pkg'))).toBe(join(root, 'deps', 'pkg'));
    expect(existsSync(join(box.dir, 'node_modules', '.vite-temp'))).toBe(false);
    await writeFile(join(box.dir, 'node_modules', 'cache-file'), 'x');
    expect(existsSync(join(root, 'deps', 'cache-file'))).toBe(false);
    expect(box.linked).toEqual([join(root, 'deps')]);
    expect(existsSync(join(box.dir, '.git'))).toBe(false);
  } finally {
    await box.dispose();
  }
  expect(existsSync(box.dir)).toBe(false);
  expect(existsSync(join(root, 'deps', 'pkg'))).toBe(true);
});

it('refuses overlay paths that leave the box and targets behind a symlinked folder', async () => {
  expect(() => insideBox('/b', '../x')).toThrow(/leaves the box/);
  expect(() => insideBox('/b', '/etc/passwd')).toThrow(/leaves the box/);
  await expect(createBox({ workspace: ws, boxesDir, overlay: { '../escape': 'x' } })).rejects.toThrow(
    /leaves/,
  );
  await symlink(join(root, 'deps'), join(ws, 'linked'));
  await expect(createBox({ workspace: ws, boxesDir, overlay: { 'linked/x.ts': 'x' } })).rejects.toThrow(
    /symlink/,
  );
  expect(existsSync(join(root, 'deps', 'x.ts'))).toBe(false);
});

it('sweeps boxes left by dead scorers only', async () => {
  await mkdir(join(boxesDir, 'box-999999999-abcd'), { recursive: true });
  const live = await createBox({ workspace: ws, boxesDir });
  try {
    expect(await sweepStaleBoxes(boxesDir)).toEqual([join(boxesDir, 'box-999999999-abcd')]);
    expect(existsSync(live.dir)).toBe(true);
  } finally {
    await live.dispose();
  }
});
