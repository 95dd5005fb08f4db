// "No engine warnings on the README's path" (issue 12): the README has users run npm on their system
// Node (20 on Debian 12) — `npm ci`, then `npx vtnode …` — while everything vtnode runs on is the
// pinned Node 22 (devDependency `node`). `npx vtnode` in the repository installs the repository itself
// into npx's cache, and npm checks the package's `engines` against the Node npm runs on: with
// `engines: { node: '>=22.18' }` every call printed ten EBADENGINE lines (and `npm ci` five more).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO, Sandbox } from '../helpers/cli.ts';

const run = promisify(execFile);
const box = new Sandbox();
afterAll(() => box.cleanup());

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  version: string;
  engines?: unknown;
  devEngines?: { runtime?: { name: string; version: string; onFail?: string } };
};

/** True when a system Node older than 22 has its npm and npx (the README's case). */
function oldSystemNpm(): boolean {
  if (!['/usr/bin/node', '/usr/bin/npm', '/usr/bin/npx'].every((f) => existsSync(f))) return false;
  const version = execFileSync('/usr/bin/node', ['-p', 'process.versions.node'], { encoding: 'utf8' });
  return Number(version.split('.')[0]) < 22;
}
/** npm on the system Node: only system directories on the PATH. */
const SYSTEM_ENV = { ...process.env, PATH: '/usr/bin:/bin', npm_config_update_notifier: 'false' };

describe('engines', () => {
  it('the package declares no `engines` npm would check against the Node npm runs on', () => {
    expect(pkg.engines).toBeUndefined();
    // What the repository's workflow needs from the Node that runs npm: the pinned Node runs the rest.
    expect(pkg.devEngines?.runtime).toEqual({ name: 'node', version: '>=20', onFail: 'warn' });
  });

  describe.skipIf(!oldSystemNpm())('with npm on a system Node older than 22', () => {
    it('`npx vtnode` in the repository prints no EBADENGINE and runs on the pinned Node', async () => {
      // A fresh npm cache: npx installs the repository into it (a cached install is not checked again).
      const cache = await box.tempDir('vt-npx-cache-');
      const { stdout, stderr } = await run('/usr/bin/npx', ['vtnode', '--version'], {
        cwd: REPO,
        env: { ...SYSTEM_ENV, npm_config_cache: cache },
        timeout: 120_000,
      });
      expect(stdout.trim()).toBe(pkg.version);
      expect(stderr).not.toMatch(/EBADENGINE/);
    }, 150_000);

    it('`npm ci` does not warn about vtnode itself (dry run: nothing is installed)', async () => {
      const dir = await box.tempDir('vt-engines-');
      for (const f of ['package.json', 'package-lock.json']) await copyFile(join(REPO, f), join(dir, f));
      const { stderr } = await run('/usr/bin/npm', ['ci', '--dry-run', '--no-audit', '--no-fund'], {
        cwd: dir,
        env: SYSTEM_ENV,
        timeout: 120_000,
      });
      // Dependencies that need Node 22 (openai, strip-json-comments) still warn: they run on the pinned Node.
      expect(stderr).not.toMatch(/EBADENGINE\s+package: 'vtnode@/);
      expect(stderr).not.toMatch(/devEngines/);
    }, 150_000);
  });
});
