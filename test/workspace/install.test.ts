import { cp, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { installPlan, installWorkspace } from '../../node/workspace/install.ts';
import { ParseError } from '../../protocol/parse.ts';
import { tempDir } from '../collect/helpers.ts';

const files = (...names: string[]) => new Set(names);
const cmd = (p: { file: string; args: string[] }[]) => p.map((c) => [c.file, ...c.args].join(' '));

describe('installPlan', () => {
  it.each([
    [['package.json', 'package-lock.json'], 'npm ci'],
    [['package.json', 'npm-shrinkwrap.json'], 'npm ci'],
    [['package.json', 'pnpm-lock.yaml'], 'pnpm install --frozen-lockfile'],
    [['package.json', 'yarn.lock'], 'yarn install --frozen-lockfile'],
    [['package.json'], 'npm install'],
  ])('installs %j with %s', (names, install) => {
    expect(cmd(installPlan(files(...names), '{}', 'package.json'))).toEqual([install]);
  });

  it.each([
    ['package-lock.json', 'npm run build'],
    ['pnpm-lock.yaml', 'pnpm run build'],
    ['yarn.lock', 'yarn build'],
  ])('builds a workspace that declares a build with the manager of %s', (lock, build) => {
    const plan = cmd(installPlan(files('package.json', lock), '{"scripts":{"build":"tsc"}}', 'package.json'));
    expect(plan[1]).toBe(build);
  });

  it('runs nothing for a workspace without package.json, and names a bad package.json', () => {
    expect(installPlan(files('a.ts'), null, 'x/package.json')).toEqual([]);
    expect(() => installPlan(files('package.json'), '{"scripts":{"build":1}}', 'x/package.json')).toThrow(
      ParseError,
    );
    expect(() => installPlan(files('package.json'), '{"scripts":{"build":1}}', 'x/package.json')).toThrow(
      /x\/package.json: scripts.build/,
    );
  });
});

describe('installWorkspace', () => {
  it('runs npm install for a workspace without a lockfile, and fails naming the build command that failed', async () => {
    const { dir, cleanup } = await tempDir('vtnode-install-');
    try {
      await cp(join(import.meta.dirname, '../fixtures/mine/node-test-repo'), dir, { recursive: true });
      const names = await readdir(dir);
      const r = await installWorkspace({ root: dir, files: names });
      expect(r.commands).toEqual(['npm install']);
      await writeFile(
        join(dir, 'package.json'),
        JSON.stringify({ name: 'x', scripts: { build: 'node -e "process.exit(3)"' } }),
      );
      await expect(installWorkspace({ root: dir, files: names })).rejects.toThrow(
        /npm run build in .* exited with 3/,
      );
    } finally {
      await cleanup();
    }
  });

  it('on an abort, kills the whole install (the build and what it started) before it settles', async () => {
    const { dir, cleanup } = await tempDir('vtnode-install-abort-');
    try {
      // A build whose grandchild keeps writing into the tree, as a slow compiler would.
      const writer = `require('fs').writeFileSync('writer.pid', String(process.pid)); setInterval(() => require('fs').writeFileSync('tick-' + Date.now(), ''), 5)`;
      await writeFile(
        join(dir, 'package.json'),
        JSON.stringify({ name: 'x', scripts: { build: `node -e "${writer.replaceAll('"', '\\"')}"` } }),
      );
      await writeFile(join(dir, 'writer.js'), '');
      const stop = new AbortController();
      const install = installWorkspace({ root: dir, files: ['package.json'], signal: stop.signal });
      const pidFile = join(dir, 'writer.pid');
      const deadline = Date.now() + 60_000;
      while (!(await readFile(pidFile, 'utf8').catch(() => ''))) {
        if (Date.now() > deadline) throw new Error('the build never started');
        await new Promise((r) => setTimeout(r, 20));
      }
      const pid = Number(await readFile(pidFile, 'utf8'));
      stop.abort(new Error('the node is stopping'));
      await expect(install).rejects.toThrow('the node is stopping');
      expect(() => process.kill(pid, 0)).toThrow(); // the writer is gone once the install settled
      const after = await readdir(dir);
      await new Promise((r) => setTimeout(r, 50));
      expect(await readdir(dir)).toEqual(after); // and nothing writes into the tree any more
    } finally {
      await cleanup();
    }
  }, 90_000);
});
