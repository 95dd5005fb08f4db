// Box layouts for monorepos: what the box shows (pure plan and real boxes) and, in the real sandbox,
// that the reference is unreadable by every path while dependencies and workspace links resolve.
import { existsSync } from 'node:fs';
import {
  chmod,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  realpath,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boxCwd, createBox } from '../../sandbox/box.ts';
import { BoxLayoutError, boxLayout, scanWorkspace } from '../../sandbox/box-layout.ts';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import { findInstallRoot } from '../../sandbox/install-root.ts';
import { DEFAULT_LIMITS } from '../../sandbox/limits.ts';

let tmp: string;
beforeAll(async () => {
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'vtnode-layout-test-')));
  // As root, runs get their own uid: the workspaces' node_modules must be readable by others.
  await chmod(tmp, 0o755);
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function tree(root: string, files: Record<string, string>, links: Record<string, string> = {}) {
  for (const [p, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, p)), { recursive: true });
    await writeFile(join(root, p), text);
  }
  for (const [p, target] of Object.entries(links)) {
    await mkdir(dirname(join(root, p)), { recursive: true });
    await symlink(target, join(root, p));
  }
  return root;
}

/** An npm-workspaces monorepo with hoisted dependencies, as `npm ci` lays it out. */
async function hoistedMonorepo(name: string): Promise<string> {
  return tree(
    join(tmp, name),
    {
      'package.json': JSON.stringify({ name: 'mono', private: true, workspaces: ['packages/*'] }),
      'package-lock.json': '{}',
      'tsconfig.base.json': '{"compilerOptions":{"strict":true}}',
      '.npmrc': '//registry.example/:_authToken=SECRET',
      'node_modules/dep/package.json': '{"name":"dep","main":"index.js"}',
      'node_modules/dep/index.js': 'module.exports = "dep";',
      'node_modules/dep/cli.js': '#!/usr/bin/env node\nconsole.log("tool")',
      'packages/a/package.json': JSON.stringify({ name: '@z/a', main: 'src/index.js' }),
      'packages/a/src/index.js': 'module.exports = "REFERENCE";',
      'packages/a/tsconfig.json': '{"extends":"../../tsconfig.base.json"}',
      'packages/b/package.json': JSON.stringify({ name: '@z/b', main: 'index.js' }),
      'packages/b/index.js': 'module.exports = "b";',
    },
    {
      'node_modules/@z/a': '../../packages/a',
      'node_modules/@z/b': '../../packages/b',
      'node_modules/.bin/tool': '../dep/cli.js',
      'node_modules/mono-root': '..',
    },
  );
}

describe('install root', () => {
  it('is the monorepo root that lists the member, never an ancestor with only a lockfile', async () => {
    const mono = await hoistedMonorepo('install-root');
    expect(findInstallRoot(join(mono, 'packages/a'))).toBe(mono);
    expect(findInstallRoot(mono)).toBe(mono);
    const stray = await tree(join(tmp, 'stray'), { 'package-lock.json': '{}', 'proj/package.json': '{}' });
    expect(findInstallRoot(join(stray, 'proj'))).toBe(join(stray, 'proj'));
    const pnpm = await tree(join(tmp, 'pnpm-root'), {
      'pnpm-workspace.yaml': "packages:\n  - 'libs/*'\n  - '!libs/skip'\n",
      'libs/x/package.json': '{}',
      'libs/skip/package.json': '{}',
    });
    expect(findInstallRoot(join(pnpm, 'libs/x'))).toBe(pnpm);
    expect(findInstallRoot(join(pnpm, 'libs/skip'))).toBe(join(pnpm, 'libs/skip'));
  });
});

describe('box layout of a hoisted monorepo member', () => {
  it('mirrors the install root and links hoisted deps, the member itself into the box, siblings read-only', async () => {
    const mono = await hoistedMonorepo('plan');
    const member = join(mono, 'packages/a');
    const plan = boxLayout(await scanWorkspace(member), '/BOX');
    expect(plan.workspaceDir).toBe('packages/a');
    const link = (p: string) => plan.links.find((l) => l.path === p)?.target;
    expect(link('packages/a/node_modules/dep')).toBe(join(mono, 'node_modules/dep'));
    // The member's own name resolves into the box's copy: the candidate, never the reference.
    expect(link('packages/a/node_modules/@z/a')).toBe('/BOX/packages/a');
    expect(link('node_modules/@z/a')).toBe('/BOX/packages/a');
    expect(link('packages/a/node_modules/@z/b')).toBe(join(mono, 'packages/b'));
    expect(link('packages/a/node_modules/.bin/tool')).toBe(join(mono, 'node_modules/dep/cli.js'));
    // A link to a folder that contains the workspace is never shown.
    expect(link('packages/a/node_modules/mono-root')).toBeUndefined();
    expect(plan.dropped.map((d) => d.path)).toContain('packages/a/node_modules/mono-root');
    expect(plan.readOnly.sort()).toEqual([join(mono, 'node_modules'), join(mono, 'packages/b')]);
    // Config files of the install root are copied; hidden files that may hold credentials are not.
    const copied = plan.clones.map((c) => c.from);
    expect(copied).toContain(join(mono, 'tsconfig.base.json'));
    expect(copied).not.toContain(join(mono, '.npmrc'));
    expect(copied).toContain(join(member, 'src'));
  });

  it('makes a real box whose workspace copy holds the candidate and resolves the same way', async () => {
    const mono = await hoistedMonorepo('box');
    const box = await createBox({
      workspace: join(mono, 'packages/a'),
      boxesDir: join(tmp, 'boxes'),
      overlay: { 'src/index.js': 'module.exports = "CANDIDATE";' },
    });
    try {
      expect(box.dir).toBe(join(box.root, 'packages/a'));
      expect(box.linked).toContain(box.root);
      expect(await readFile(join(box.dir, 'node_modules/@z/a/src/index.js'), 'utf8')).toMatch(/CANDIDATE/);
      expect(await readFile(join(box.root, 'tsconfig.base.json'), 'utf8')).toMatch(/strict/);
      expect(existsSync(join(box.root, '.npmrc'))).toBe(false);
      expect(await readlink(join(box.dir, 'node_modules/dep'))).toBe(join(mono, 'node_modules/dep'));
      expect(boxCwd(box, 'src')).toBe(join(box.dir, 'src'));
      expect(() => boxCwd(box, '../b')).toThrow(/leaves the box/);
    } finally {
      await box.dispose();
    }
    expect(existsSync(box.root)).toBe(false);
  });
});

describe('box layout of a monorepo root', () => {
  it('turns members’ nested node_modules into link folders instead of copying them', async () => {
    const root = await tree(
      join(tmp, 'pnpm-like'),
      {
        'package.json': '{"name":"root","private":true}',
        'pnpm-workspace.yaml': "packages:\n  - 'packages/*'\n",
        'node_modules/.pnpm/dep@1.0.0/node_modules/dep/index.js': 'module.exports = 1;',
        'packages/a/package.json': '{"name":"@z/a"}',
        'packages/a/src/index.js': 'module.exports = "REFERENCE";',
        'packages/b/package.json': '{"name":"@z/b"}',
        'packages/b/src/b.js': 'module.exports = "b";',
      },
      {
        'node_modules/dep': '.pnpm/dep@1.0.0/node_modules/dep',
        'packages/b/node_modules/dep': '../../../node_modules/.pnpm/dep@1.0.0/node_modules/dep',
        'packages/b/node_modules/@z/a': '../../../a',
      },
    );
    const scan = await scanWorkspace(root);
    expect(scan.nested.map((n) => n.path)).toEqual(['packages/b/node_modules']);
    const plan = boxLayout(scan, '/BOX');
    expect(plan.workspaceDir).toBe('');
    const link = (p: string) => plan.links.find((l) => l.path === p)?.target;
    expect(link('packages/b/node_modules/@z/a')).toBe('/BOX/packages/a');
    expect(link('packages/b/node_modules/dep')).toBe(
      join(root, 'node_modules/.pnpm/dep@1.0.0/node_modules/dep'),
    );
    // packages/b is descended into (it holds node_modules); its other entries and packages/a are cloned.
    expect(plan.clones.map((c) => c.from)).toEqual(
      expect.arrayContaining([join(root, 'packages/a'), join(root, 'packages/b/src')]),
    );
    expect(plan.clones.map((c) => c.from)).not.toContain(join(root, 'packages/b'));
    expect(plan.readOnly.sort()).toEqual([join(root, 'node_modules'), join(root, 'packages/b/node_modules')]);
  });

  it('refuses node_modules holding an installed copy of a workspace package (it is the reference)', async () => {
    const copy = await tree(join(tmp, 'install-links'), {
      'package.json': JSON.stringify({ name: 'mono', workspaces: ['packages/*'] }),
      'packages/a/package.json': '{"name":"@z/a"}',
      'packages/a/src/index.js': 'REFERENCE',
      'node_modules/@z/a/package.json': '{"name":"@z/a"}',
      'node_modules/@z/a/src/index.js': 'REFERENCE',
    });
    await expect(scanWorkspace(copy).then((s) => boxLayout(s, '/BOX'))).rejects.toThrow(
      /installed copy of the workspace's own package @z\/a/,
    );
    await expect(scanWorkspace(join(copy, 'packages/a')).then((s) => boxLayout(s, '/BOX'))).rejects.toThrow(
      BoxLayoutError,
    );
    const injected = await tree(join(tmp, 'injected'), {
      'package.json': '{"name":"root"}',
      'pnpm-workspace.yaml': "packages:\n  - 'packages/*'\n",
      'packages/a/package.json': '{"name":"@z/a"}',
      'node_modules/.pnpm/@z+a@file+packages+a/node_modules/@z/a/index.js': 'REFERENCE',
    });
    await expect(scanWorkspace(injected).then((s) => boxLayout(s, '/BOX'))).rejects.toThrow(/injected copy/);
  });
});

describe('in the real sandbox (bwrap)', () => {
  it('resolves hoisted deps, siblings and the self-link; the reference is unreadable by every path', async () => {
    const mono = await hoistedMonorepo('sandboxed');
    const member = join(mono, 'packages/a');
    const bwrap = await createBwrapConfinement();
    const box = await createBox({
      workspace: member,
      boxesDir: join(tmp, 'boxes'),
      overlay: { 'src/index.js': 'module.exports = "CANDIDATE";' },
    });
    try {
      const probe = `
        const fs = require('node:fs');
        const out = {};
        const tryRead = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return e.code; } };
        out.self = require('@z/a');
        out.sibling = require('@z/b');
        out.dep = require('dep');
        out.real = tryRead(${JSON.stringify(join(member, 'src/index.js'))});
        out.viaRootLink = tryRead(${JSON.stringify(join(mono, 'node_modules/@z/a/src/index.js'))});
        out.rootDir = tryRead(${JSON.stringify(join(mono, 'package.json'))});
        out.npmrc = tryRead(${JSON.stringify(join(mono, '.npmrc'))});
        out.writeRoot = (() => { try { fs.writeFileSync(${JSON.stringify(join(box.root, 'x'))}, 'x'); return 'written'; } catch (e) { return e.code; } })();
        console.log(JSON.stringify(out));
      `;
      const r = await bwrap.run({
        argv: [process.execPath, '-e', probe],
        cwd: box.dir,
        box: box.dir,
        readOnlyPaths: [...box.linked, dirname(dirname(process.execPath))],
        env: { PATH: '/usr/bin:/bin', HOME: join(box.dir, '.home') },
        limits: { ...DEFAULT_LIMITS, wallMs: 20_000 },
      });
      expect(r.stderr).toBe('');
      expect(JSON.parse(r.stdout)).toEqual({
        self: 'CANDIDATE',
        sibling: 'b',
        dep: 'dep',
        real: 'ENOENT',
        viaRootLink: 'ENOENT',
        rootDir: 'ENOENT',
        npmrc: 'ENOENT',
        writeRoot: 'EROFS',
      });
    } finally {
      await box.dispose();
    }
  });
});
