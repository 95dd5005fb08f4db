// Can the judges run in a workspace as installed? Real folders, no processes.
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refuseUnreadyWorkspace } from '../../cli/scorer.ts';
import { checkWorkspaceReady, resolvePackageDir } from '../../sandbox/workspace-ready.ts';

let tmp: string;
beforeAll(async () => {
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'vtnode-ready-test-')));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function tree(name: string, files: Record<string, unknown>, links: Record<string, string> = {}) {
  const root = join(tmp, name);
  for (const [p, v] of Object.entries(files)) {
    await mkdir(dirname(join(root, p)), { recursive: true });
    await writeFile(join(root, p), typeof v === 'string' ? v : JSON.stringify(v));
  }
  for (const [p, target] of Object.entries(links)) {
    await mkdir(dirname(join(root, p)), { recursive: true });
    await symlink(target, join(root, p));
  }
  return root;
}

const monorepo = (lockfile: string) => ({
  'package.json': {
    name: 'mono',
    private: true,
    workspaces: ['packages/*'],
    devDependencies: { vitest: '1' },
  },
  [lockfile]: '',
  'packages/core/package.json': {
    name: '@z/core',
    exports: { '.': { types: './dist/x.d.ts', import: './dist/index.js' } },
    scripts: { build: 'tsc' },
  },
  'packages/app/package.json': { name: '@z/app', dependencies: { '@z/core': '1', leftpad: '1' } },
});

describe('checkWorkspaceReady', () => {
  it('finds hoisted dependencies of a member, and asks to build an unbuilt workspace package', async () => {
    const root = await tree(
      'hoisted',
      {
        ...monorepo('package-lock.json'),
        'node_modules/vitest/package.json': {},
        'node_modules/leftpad/package.json': {},
      },
      { 'node_modules/@z/core': '../../packages/core' },
    );
    const member = join(root, 'packages/app');
    expect(resolvePackageDir(member, 'vitest', root)).toBe(join(root, 'node_modules/vitest'));
    expect(resolvePackageDir(member, '@z/core', root)).toBe(join(root, 'packages/core'));
    const r = checkWorkspaceReady({ workspace: member, runners: ['vitest', 'node:test'] });
    expect(r.installRoot).toBe(root);
    expect(r.problems).toEqual([
      'workspace package @z/core is not built (no ./dist/index.js in packages/core)',
    ]);
    expect(r.fixes).toEqual([{ command: 'npm run build', cwd: join(root, 'packages/core') }]);
    await mkdir(join(root, 'packages/core/dist'));
    await writeFile(join(root, 'packages/core/dist/index.js'), '');
    expect(checkWorkspaceReady({ workspace: member, runners: ['vitest'] }).ok).toBe(true);
  });

  it('names the install command of the package manager by the lockfile, in the install root', async () => {
    for (const [lockfile, command] of [
      ['pnpm-lock.yaml', 'pnpm install --frozen-lockfile'],
      ['yarn.lock', 'yarn install --frozen-lockfile'],
      ['package-lock.json', 'npm ci'],
    ] as const) {
      const root = await tree(`bare-${lockfile}`, monorepo(lockfile));
      const r = checkWorkspaceReady({ workspace: join(root, 'packages/app'), runners: ['vitest'] });
      expect(r.ok).toBe(false);
      expect(r.problems[0]).toMatch(/^vitest is not installed/);
      expect(r.problems[1]).toBe('2 dependencies are not installed (@z/core, leftpad)');
      expect(r.fixes).toEqual([{ command, cwd: root }]);
    }
  });

  it('never looks above the install root, and resolves a package importing its own name', async () => {
    const outer = await tree('outer', {
      'node_modules/vitest/package.json': {},
      'proj/package.json': { name: 'proj', exports: './index.js' },
      'proj/index.js': '',
    });
    const proj = join(outer, 'proj');
    expect(resolvePackageDir(proj, 'vitest', proj)).toBeNull();
    expect(checkWorkspaceReady({ workspace: proj, runners: ['vitest'] }).ok).toBe(false);
    expect(resolvePackageDir(proj, 'proj', proj)).toBe(proj);
    expect(checkWorkspaceReady({ workspace: proj, imported: [{ name: 'proj', from: '' }] }).ok).toBe(true);
  });

  it('refuses up front in the CLI with the message, or for a workspace that does not exist', async () => {
    const root = await tree('cli', monorepo('yarn.lock'));
    expect(() => refuseUnreadyWorkspace(join(root, 'packages/app'))).toThrow(
      /cannot run its tests: .*leftpad.*Run `yarn install --frozen-lockfile` in/,
    );
    expect(() => refuseUnreadyWorkspace(join(root, 'nope'))).toThrow(/workspace .*nope: ENOENT/);
  });
});
