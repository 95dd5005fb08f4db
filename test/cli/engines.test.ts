// Node versions (issue 12): the package declares what it runs on (`engines`: the bundle needs Node
// >= 22.13 for node:sqlite without a flag; bin/vtnode.js refuses an older Node, and the sources' 22.18,
// with a clear message). The README has users run npm on their system Node (20 on Debian 12) while
// everything vtnode runs on is the pinned Node 22 (devDependency `node`): npm then warns (EBADENGINE)
// that its own Node is older, which is true and harmless, and `npx vtnode` still runs on the pinned Node.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
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
  it('the package declares the Node it runs on, and the Node the repository workflow needs for npm', () => {
    expect(pkg.engines).toEqual({ node: '>=22.13' });
    // What the repository's workflow needs from the Node that runs npm: the pinned Node runs the rest.
    expect(pkg.devEngines?.runtime).toEqual({ name: 'node', version: '>=20', onFail: 'warn' });
  });

  describe.skipIf(!oldSystemNpm())('with npm on a system Node older than 22', () => {
    it('`npx vtnode` in the repository runs on the pinned Node', async () => {
      // A fresh npm cache: npx installs the repository into it (a cached install is not checked again).
      const cache = await box.tempDir('vt-npx-cache-');
      const { stdout, stderr } = await run('/usr/bin/npx', ['vtnode', '--version'], {
        cwd: REPO,
        env: { ...SYSTEM_ENV, npm_config_cache: cache },
        timeout: 120_000,
      });
      expect(stdout.trim()).toBe(pkg.version);
      expect(stderr).not.toMatch(/needs Node\.js/);
    }, 150_000);
  });
});
