// The package as a user gets it: build, `npm pack`, `npm i -g` from the tarball into a temp prefix
// (offline: the tarball must carry everything it runs), then vtnode from a directory outside the
// repository, with HOME and the data dir in temp: --version, init, start until ready, doctor, leave.
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, REPO, Sandbox } from '../helpers/cli.ts';

const run = promisify(execFile);
const box = new Sandbox();
afterAll(() => box.cleanup());

const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
let prefix: string;
let cwd: string;
let env: NodeJS.ProcessEnv;

/** `vtnode ARGS` as installed (through its bin link and #! line), from `cwd`. */
function vt(args: string[], timeout = 60_000) {
  return run(join(prefix, 'bin', 'vtnode'), args, { cwd, env, timeout }).then(
    (ok) => ({ code: 0, ...ok }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

beforeAll(async () => {
  const dir = await box.tempDir('vt-pkg-');
  prefix = join(dir, 'prefix');
  cwd = join(dir, 'somewhere');
  await mkdir(cwd);
  // npm runs on the Node under test (the pinned one in the repository), like `npx` does.
  const path = [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter);
  const npmEnv = {
    ...process.env,
    PATH: path,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
  };
  await run(process.execPath, [join(REPO, 'scripts', 'build.ts')], { cwd: REPO, timeout: 180_000 });
  await run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], {
    cwd: REPO,
    env: npmEnv,
    timeout: 120_000,
  });
  const tarball = join(dir, `vtnode-${version}.tgz`);
  await run('npm', ['install', '--global', '--prefix', prefix, '--offline', '--no-audit', tarball], {
    cwd: dir,
    env: { ...npmEnv, npm_config_cache: join(dir, 'npm-cache') },
    timeout: 120_000,
  });
  const home = join(dir, 'home');
  env = {
    ...process.env,
    HOME: home,
    VTNODE_HOME: join(home, '.vtnode'),
    PATH: [join(prefix, 'bin'), path].join(delimiter),
    VTNODE_DEBUG: '',
  };
}, 300_000);

describe('installed from the tarball', () => {
  it('holds the bundle and the runtime files, not the sources', () => {
    const root = join(prefix, 'lib', 'node_modules', 'vtnode');
    expect(existsSync(join(root, 'dist', 'vtnode.js'))).toBe(true);
    expect(existsSync(join(root, 'cli'))).toBe(false);
    expect(existsSync(join(root, 'node_modules', 'typescript', 'package.json'))).toBe(true);
    expect(readdirSync(join(root, 'node_modules')).filter((n) => n !== '.bin')).toEqual(['typescript']);
    expect(existsSync(join(root, 'sandbox', 'integrity', 'harden.cjs'))).toBe(true);
  });

  it('--version, init, start --ui until ready, the web view, doctor, leave: from a directory outside the repository', async () => {
    const v = await vt(['--version']);
    expect(v.stdout.trim()).toBe(version);

    const init = await vt(['init', '--fleet', 'pkg', '--listen', `/ip4/127.0.0.1/tcp/${await freePort()}`]);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stderr).toContain(join(env.HOME!, '.vtnode'));

    const node = spawn(join(prefix, 'bin', 'vtnode'), ['start', '--ui'], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    node.stdout.on('data', (d) => {
      out += d;
    });
    node.stderr.on('data', (d) => {
      out += d;
    });
    const exited = new Promise<number | null>((r) => node.once('exit', r));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`start: not ready in 60 s:\n${out}`)), 60_000);
        const check = () => {
          if (/is in fleet "pkg"/.test(out) && /web view http/.test(out)) {
            clearTimeout(timer);
            resolve();
          }
        };
        node.stderr.on('data', check);
        node.once('exit', (code) => reject(new Error(`start exited (${code}):\n${out}`)));
      });

      // The web view from the package: the page, its prebuilt script (dist/ui), the live state, metrics.
      const ui = /web view (http:\/\/\S+)/.exec(out)![1]!.replace(/\/$/, '');
      const get = async (path: string) => {
        const res = await fetch(`${ui}${path}`);
        expect(res.status, path).toBe(200);
        return res.text();
      };
      expect(await get('/')).toMatch(/<script[^>]+app\.js/);
      expect(await get('/app.js')).toContain('EventSource');
      expect(JSON.parse(await get('/api/state'))).toHaveProperty('fleet');
      expect(await get('/metrics')).toMatch(/^# HELP /m);

      const doctor = await vt(['doctor', '--json']);
      const checks = (
        JSON.parse(doctor.stdout) as { checks: { name: string; status: string; detail: string }[] }
      ).checks;
      const status = Object.fromEntries(checks.map((c) => [c.name, `${c.status}: ${c.detail}`]));
      expect(status['node']).toMatch(/^ok: /);
      expect(status['identity']).toMatch(/^ok: .*fleet "pkg"/);
      expect(status['daemon']).toMatch(/^ok: running/);
      // The sandbox self-test runs the shipped harness files: it passes wherever bubblewrap is installed.
      if (existsSync('/usr/bin/bwrap')) expect(status['sandbox']).toMatch(/^ok: bwrap, self-test passed/);

      const leave = await vt(['leave']);
      expect(leave.code, leave.stderr).toBe(0);
      expect(await exited).toBe(0);
      expect(out).toMatch(/vtnode stopped/);
    } finally {
      node.kill('SIGKILL');
    }
  }, 120_000);
});
