import { execFile, execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSystemdVersion } from '../../cli/commands/service.ts';
import {
  checkServicePath,
  launchdPlist,
  planInstall,
  planUninstall,
  type ServiceSpec,
  serviceName,
  servicePath,
  serviceStatus,
  statusCommands,
  systemdExecWord,
  systemdQuote,
  systemdUnit,
  xmlEscape,
} from '../../node/service/units.ts';

const mac: ServiceSpec = {
  platform: 'darwin',
  scope: 'user',
  node: '/opt/homebrew/Cellar/node@22/22.18.0/bin/node',
  entry: '/Users/ada/src/vtnode/bin/vtnode.js',
  dataDir: '/Users/ada/.vtnode',
  name: 'vtnode',
  home: '/Users/ada',
  user: 'ada',
  uid: 501,
  path: '/opt/homebrew/Cellar/node@22/22.18.0/bin:/opt/homebrew/bin:/usr/bin:/bin',
  systemdVersion: null,
};
const linux: ServiceSpec = {
  ...mac,
  platform: 'linux',
  node: '/home/ada/.nvm/versions/node/v22.18.0/bin/node',
  entry: '/home/ada/vtnode/bin/vtnode.js',
  dataDir: '/home/ada/.vtnode',
  home: '/home/ada',
  uid: 1000,
  path: '/home/ada/.nvm/versions/node/v22.18.0/bin:/usr/local/bin:/usr/bin:/bin',
  systemdVersion: 252,
};

describe('launchd property list', () => {
  it('a user agent: runs vtnode start by absolute paths, restarts on failure, logs in ~/Library/Logs/vtnode', () => {
    expect(launchdPlist(mac)).toMatchInlineSnapshot(`
      "<?xml version="1.0" encoding="UTF-8"?>
      <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
      <plist version="1.0">
      <dict>
        <key>Label</key><string>dev.vtnode</string>
        <key>ProgramArguments</key>
        <array>
          <string>/opt/homebrew/Cellar/node@22/22.18.0/bin/node</string>
          <string>/Users/ada/src/vtnode/bin/vtnode.js</string>
          <string>start</string>
          <string>--data-dir</string>
          <string>/Users/ada/.vtnode</string>
        </array>
        <key>EnvironmentVariables</key>
        <dict>
          <key>PATH</key><string>/opt/homebrew/Cellar/node@22/22.18.0/bin:/opt/homebrew/bin:/usr/bin:/bin</string>
        </dict>
        <key>RunAtLoad</key><true/>
        <key>KeepAlive</key>
        <dict>
          <key>SuccessfulExit</key><false/>
        </dict>
        <key>ThrottleInterval</key><integer>10</integer>
        <key>ExitTimeOut</key><integer>30</integer>
        <key>StandardOutPath</key><string>/Users/ada/Library/Logs/vtnode/vtnode.log</string>
        <key>StandardErrorPath</key><string>/Users/ada/Library/Logs/vtnode/vtnode.log</string>
      </dict>
      </plist>
      "
    `);
  });

  it('a system daemon names its user and logs in /Library/Logs/vtnode', () => {
    const text = launchdPlist({ ...mac, scope: 'system' });
    expect(text).toContain('<key>UserName</key><string>ada</string>');
    expect(text).toContain('<string>/Library/Logs/vtnode/vtnode.log</string>');
    expect(planInstall({ ...mac, scope: 'system' }).file.path).toBe(
      '/Library/LaunchDaemons/dev.vtnode.plist',
    );
  });

  it('escapes paths with spaces, &, <, > and quotes', () => {
    const dataDir = `/Users/ada/My Nodes/R&D <main> "a" 'b'`;
    const text = launchdPlist({ ...mac, dataDir });
    expect(text).toContain(
      '<string>/Users/ada/My Nodes/R&amp;D &lt;main&gt; &quot;a&quot; &apos;b&apos;</string>',
    );
    // No raw markup from the path: every & starts an entity.
    expect(text.replace(/&(amp|lt|gt|quot|apos);/g, '')).not.toMatch(/[&]/);
    expect(xmlEscape('a&amp;b')).toBe('a&amp;amp;b');
  });
});

describe('systemd unit', () => {
  it('a user unit (systemd 252, no back-off keys)', () => {
    expect(systemdUnit(linux)).toMatchInlineSnapshot(`
      "[Unit]
      Description=vtnode node (data dir /home/ada/.vtnode)

      [Service]
      Type=simple
      ExecStart=/home/ada/.nvm/versions/node/v22.18.0/bin/node /home/ada/vtnode/bin/vtnode.js start --data-dir /home/ada/.vtnode
      Environment="PATH=/home/ada/.nvm/versions/node/v22.18.0/bin:/usr/local/bin:/usr/bin:/bin"
      Restart=on-failure
      RestartSec=10s
      KillSignal=SIGTERM
      TimeoutStopSec=30s

      [Install]
      WantedBy=default.target
      "
    `);
  });

  it('a system unit (systemd 256): User=, network-online, back-off from 5 s to 5 min', () => {
    expect(systemdUnit({ ...linux, scope: 'system', systemdVersion: 256 })).toMatchInlineSnapshot(`
      "[Unit]
      Description=vtnode node (data dir /home/ada/.vtnode)
      Wants=network-online.target
      After=network-online.target
      StartLimitIntervalSec=0

      [Service]
      Type=simple
      ExecStart=/home/ada/.nvm/versions/node/v22.18.0/bin/node /home/ada/vtnode/bin/vtnode.js start --data-dir /home/ada/.vtnode
      Environment="PATH=/home/ada/.nvm/versions/node/v22.18.0/bin:/usr/local/bin:/usr/bin:/bin"
      User=ada
      Restart=on-failure
      RestartSec=5s
      RestartSteps=10
      RestartMaxDelaySec=5min
      KillSignal=SIGTERM
      TimeoutStopSec=30s

      [Install]
      WantedBy=multi-user.target
      "
    `);
  });

  it('quotes words: spaces, quotes, backslashes; % doubled everywhere, $ doubled in ExecStart', () => {
    expect(systemdQuote('/home/a b/x', { exec: true })).toBe('"/home/a b/x"');
    expect(systemdQuote('a"b\\c', { exec: true })).toBe('"a\\"b\\\\c"');
    expect(systemdQuote('50%$HOME', { exec: true })).toBe('"50%%$$HOME"');
    expect(systemdQuote('PATH=50%$HOME', { exec: false })).toBe('"PATH=50%%$HOME"');
    expect(systemdExecWord('--data-dir')).toBe('--data-dir');
    expect(systemdExecWord('/a b')).toBe('"/a b"');
    expect(systemdExecWord('')).toBe('""');
    expect(systemdExecWord('~/x;y')).toBe('"~/x;y"');
    const text = systemdUnit({ ...linux, dataDir: '/srv/my nodes/50%' });
    expect(text).toContain('start --data-dir "/srv/my nodes/50%%"');
    expect(text).toContain('Description=vtnode node (data dir /srv/my nodes/50%%)');
  });
});

describe('refusals and names', () => {
  it('refuses a relative path or one with a control character', () => {
    expect(() => checkServicePath('rel/dir', 'data dir')).toThrow(
      /data dir "rel\/dir": not an absolute path/,
    );
    expect(() => planInstall({ ...linux, dataDir: '/a\nExecStartPre=/bin/rm' })).toThrow(
      /data dir .*control character/,
    );
    expect(() => planInstall({ ...linux, scope: 'system', user: 'ada\nUser=root' })).toThrow(
      /not a user name/,
    );
  });

  it('names the default data dir `vtnode`, another one by a hash of its path', () => {
    expect(serviceName('/home/ada/.vtnode', '/home/ada/.vtnode')).toBe('vtnode');
    const other = serviceName('/tmp/vt-b', '/home/ada/.vtnode');
    expect(other).toMatch(/^vtnode-[0-9a-f]{8}$/);
    expect(serviceName('/tmp/vt-c', '/home/ada/.vtnode')).not.toBe(other);
  });

  it('PATH: the node binary first, no repeats, no relative entries', () => {
    expect(servicePath('/opt/node/bin/node', '/usr/bin:.:/opt/node/bin:bin:/sbin')).toBe(
      '/opt/node/bin:/usr/bin:/sbin:/usr/local/bin:/bin',
    );
    expect(servicePath('/opt/node/bin/node', undefined)).toBe('/opt/node/bin:/usr/local/bin:/usr/bin:/bin');
  });
});

describe('plans', () => {
  it('launchd: unload an earlier agent (may fail), enable, bootstrap in gui/<uid>', () => {
    const plan = planInstall(mac);
    expect(plan.file.path).toBe('/Users/ada/Library/LaunchAgents/dev.vtnode.plist');
    expect(plan.dirs).toEqual(['/Users/ada/Library/LaunchAgents', '/Users/ada/Library/Logs/vtnode']);
    expect(plan.commands).toEqual([
      { argv: ['launchctl', 'bootout', 'gui/501/dev.vtnode'], mayFail: true },
      { argv: ['launchctl', 'enable', 'gui/501/dev.vtnode'], mayFail: false },
      {
        argv: ['launchctl', 'bootstrap', 'gui/501', '/Users/ada/Library/LaunchAgents/dev.vtnode.plist'],
        mayFail: false,
      },
    ]);
    expect(planUninstall(mac).before).toEqual([
      { argv: ['launchctl', 'bootout', 'gui/501/dev.vtnode'], mayFail: true },
    ]);
    expect(
      planInstall({ ...mac, scope: 'system' })
        .commands.at(-1)!
        .argv.slice(0, 3),
    ).toEqual(['launchctl', 'bootstrap', 'system']);
  });

  it('systemd user: reload, enable, (re)start, linger; uninstall disables before removing', () => {
    const plan = planInstall(linux);
    expect(plan.file.path).toBe('/home/ada/.config/systemd/user/vtnode.service');
    expect(plan.commands.map((c) => c.argv.join(' '))).toEqual([
      'systemctl --user daemon-reload',
      'systemctl --user enable vtnode.service',
      'systemctl --user restart vtnode.service',
      'loginctl enable-linger ada',
    ]);
    expect(plan.logs).toBe('journalctl --user -u vtnode.service -f');
    const un = planUninstall(linux);
    expect(un.before.map((c) => [c.argv.join(' '), c.mayFail])).toEqual([
      ['systemctl --user disable --now vtnode.service', true],
    ]);
    expect(un.after.map((c) => c.argv.join(' '))).toEqual(['systemctl --user daemon-reload']);
  });

  it('systemd system: /etc/systemd/system, no --user, no linger', () => {
    const plan = planInstall({ ...linux, scope: 'system' });
    expect(plan.file.path).toBe('/etc/systemd/system/vtnode.service');
    expect(plan.commands.map((c) => c.argv.join(' '))).toEqual([
      'systemctl daemon-reload',
      'systemctl enable vtnode.service',
      'systemctl restart vtnode.service',
    ]);
  });
});

describe('status', () => {
  it('systemd: is-enabled and is-active', () => {
    expect(statusCommands(linux)).toEqual([
      ['systemctl', '--user', 'is-enabled', 'vtnode.service'],
      ['systemctl', '--user', 'is-active', 'vtnode.service'],
    ]);
    const ok = { code: 0, stderr: '' };
    expect(
      serviceStatus(linux, true, [
        { ...ok, stdout: 'enabled\n' },
        { ...ok, stdout: 'active\n' },
      ]),
    ).toEqual({
      installed: true,
      enabled: true,
      running: true,
      pid: null,
      detail: 'systemd: enabled, active',
    });
    expect(
      serviceStatus(linux, true, [
        { code: 1, stderr: '', stdout: 'disabled\n' },
        { code: 3, stderr: '', stdout: 'failed\n' },
      ]),
    ).toMatchObject({ enabled: false, running: false, detail: 'systemd: disabled, failed' });
    expect(serviceStatus(linux, false, [])).toMatchObject({
      installed: false,
      enabled: false,
      running: false,
      detail: 'systemd gave no state: no result',
    });
    // No systemd (a container, no user bus): what systemctl said, not "unknown, unknown".
    const bus = 'Failed to connect to bus: No medium found';
    expect(
      serviceStatus(linux, false, [
        { code: 1, stdout: '', stderr: `${bus}\n` },
        { code: 1, stdout: '', stderr: `${bus}\n` },
      ]).detail,
    ).toBe(`systemd gave no state: ${bus}`);
    expect(serviceStatus(linux, false, [{ code: 127, stdout: '', stderr: '' }]).detail).toBe(
      'systemd gave no state: systemctl exited 127',
    );
  });

  it('launchd: launchctl print says state and pid', () => {
    const print = 'gui/501/dev.vtnode = {\n\tactive count = 1\n\tstate = running\n\tpid = 4242\n}\n';
    expect(serviceStatus(mac, true, [{ code: 0, stdout: print, stderr: '' }])).toEqual({
      installed: true,
      enabled: true,
      running: true,
      pid: 4242,
      detail: 'launchd: state running',
    });
    expect(
      serviceStatus(mac, true, [
        { code: 0, stdout: '\tstate = not running\n\tlast exit code = 1\n', stderr: '' },
      ]),
    ).toMatchObject({ enabled: true, running: false, pid: null });
    expect(
      serviceStatus(mac, false, [{ code: 113, stdout: '', stderr: 'Could not find service' }]),
    ).toMatchObject({
      enabled: false,
      running: false,
      detail: 'launchd: not loaded',
    });
  });
});

const analyze = (() => {
  try {
    execFileSync('systemd-analyze', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

// systemd-analyze exists on Linux with systemd (Debian: the systemd package); macOS has none.
describe.skipIf(!analyze)('systemd-analyze verify (skipped: no systemd-analyze on this machine)', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  /** A unit whose node binary and entry sit under a folder with a space and a % in its name. */
  async function unitWithAwkwardPaths(scope: 'user' | 'system') {
    const dir = await mkdtemp(join(tmpdir(), 'vt unit 50%-'));
    dirs.push(dir);
    const node = join(dir, 'node bin', 'node');
    await mkdir(join(dir, 'node bin'));
    await symlink(process.execPath, node);
    const entry = join(dir, 'vt node.js');
    await writeFile(entry, '');
    await chmod(entry, 0o644);
    const spec: ServiceSpec = {
      ...linux,
      scope,
      node,
      entry,
      dataDir: join(dir, 'data $HOME'),
      user: 'root',
      path: servicePath(node, '/usr/bin:/bin'),
      systemdVersion: 252,
    };
    const file = join(dir, 'vtnode.service');
    return { spec, file };
  }

  const verify = (file: string) =>
    promisify(execFile)('systemd-analyze', ['verify', file], { cwd: tmpdir() }).then(
      (r) => ({ code: 0, stderr: r.stderr }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );

  for (const scope of ['user', 'system'] as const) {
    it(`accepts the ${scope} unit, paths with spaces and % included, with no warning`, async () => {
      const { spec, file } = await unitWithAwkwardPaths(scope);
      await writeFile(file, systemdUnit(spec));
      expect(await verify(file)).toEqual({ code: 0, stderr: '' });
    });
  }

  it('catches an unquoted path with a space (the check can fail)', async () => {
    const { spec, file } = await unitWithAwkwardPaths('system');
    const broken = systemdUnit(spec).replace(/^ExecStart="([^"]+)"/m, 'ExecStart=$1');
    expect(broken).not.toBe(systemdUnit(spec));
    await writeFile(file, broken);
    const r = await verify(file);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/not executable|No such file/);
  });
});

describe('systemd version', () => {
  it('reads the number from `systemctl --version`, null when absent', () => {
    expect(parseSystemdVersion('systemd 252 (252.38-1~deb12u1)\n+PAM +AUDIT\n')).toBe(252);
    expect(parseSystemdVersion('systemd 256 (256.7-1)\n')).toBe(256);
    expect(parseSystemdVersion('')).toBeNull();
    expect(parseSystemdVersion('bash: systemctl: command not found')).toBeNull();
  });
});
