import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type CommandRunner,
  installService,
  readServiceStatus,
  ServiceCommandError,
  uninstallService,
} from '../../node/service/manager.ts';
import type { CommandResult, ServiceSpec } from '../../node/service/units.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function spec(platform: 'darwin' | 'linux'): Promise<ServiceSpec> {
  const home = await mkdtemp(join(tmpdir(), 'vt-service-home-'));
  dirs.push(home);
  return {
    platform,
    scope: 'user',
    node: process.execPath,
    entry: '/opt/vtnode/bin/vtnode.js',
    dataDir: join(home, '.vtnode'),
    name: 'vtnode',
    home,
    user: 'ada',
    uid: 501,
    path: '/usr/bin:/bin',
    systemdVersion: 252,
  };
}

/** Records every command; answers from `answers` by the command line, else exit 0. */
function recorder(answers: Record<string, CommandResult> = {}) {
  const calls: string[] = [];
  const run: CommandRunner = async (argv) => {
    calls.push(argv.join(' '));
    return answers[argv.join(' ')] ?? { code: 0, stdout: '', stderr: '' };
  };
  return { calls, run };
}

describe('service manager (real files, recorded commands)', () => {
  it('systemd: writes the unit 0644, runs the install commands in order; status; uninstall removes it', async () => {
    const s = await spec('linux');
    const { calls, run } = recorder({
      'systemctl --user is-enabled vtnode.service': { code: 0, stdout: 'enabled\n', stderr: '' },
      'systemctl --user is-active vtnode.service': { code: 0, stdout: 'active\n', stderr: '' },
    });
    await installService(s, { run });
    const unit = join(s.home, '.config/systemd/user/vtnode.service');
    expect(await readFile(unit, 'utf8')).toContain(
      `ExecStart=${process.execPath} /opt/vtnode/bin/vtnode.js start`,
    );
    expect((await stat(unit)).mode & 0o777).toBe(0o644);
    expect(calls).toEqual([
      'systemctl --user daemon-reload',
      'systemctl --user enable vtnode.service',
      'systemctl --user restart vtnode.service',
      'loginctl enable-linger ada',
    ]);
    expect(await readServiceStatus(s, { run })).toMatchObject({
      installed: true,
      enabled: true,
      running: true,
    });

    calls.length = 0;
    expect(await uninstallService(s, { run })).toBe(true);
    await expect(stat(unit)).rejects.toThrow(/ENOENT/);
    expect(calls).toEqual([
      'systemctl --user disable --now vtnode.service',
      'systemctl --user daemon-reload',
    ]);
    calls.length = 0;
    expect(await uninstallService(s, { run })).toBe(false);
    expect(calls).toEqual(['systemctl --user disable --now vtnode.service']);
  });

  it('launchd: a failed bootout (nothing loaded) is fine; a failed bootstrap is an error naming the command', async () => {
    const s = await spec('darwin');
    const ok = recorder({
      'launchctl bootout gui/501/dev.vtnode': { code: 3, stdout: '', stderr: 'No such process' },
    });
    await installService(s, { run: ok.run });
    expect(ok.calls).toHaveLength(3);
    expect(await readFile(join(s.home, 'Library/LaunchAgents/dev.vtnode.plist'), 'utf8')).toContain(
      '<key>Label</key><string>dev.vtnode</string>',
    );
    expect((await stat(join(s.home, 'Library/Logs/vtnode'))).isDirectory()).toBe(true);

    const bad = recorder({
      [`launchctl bootstrap gui/501 ${join(s.home, 'Library/LaunchAgents/dev.vtnode.plist')}`]: {
        code: 5,
        stdout: '',
        stderr: 'Bootstrap failed: 5: Input/output error',
      },
    });
    const plist = join(s.home, 'Library/LaunchAgents/dev.vtnode.plist');
    await writeFile(plist, 'the earlier file');
    const err = await installService(s, { run: bad.run }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceCommandError);
    expect((err as Error).message).toMatch(
      /`launchctl bootstrap gui\/501 .*` failed \(exit 5\): Bootstrap failed/,
    );
    // The file goes back to what it was: an earlier one is restored, a new one removed.
    expect(await readFile(plist, 'utf8')).toBe('the earlier file');
    await rm(plist);
    await expect(installService(s, { run: bad.run })).rejects.toThrow(ServiceCommandError);
    await expect(stat(plist)).rejects.toThrow(/ENOENT/);
  });

  it('stops between commands when aborted', async () => {
    const s = await spec('linux');
    const abort = new AbortController();
    const calls: string[] = [];
    const run: CommandRunner = async (argv) => {
      calls.push(argv.join(' '));
      abort.abort();
      return { code: 0, stdout: '', stderr: '' };
    };
    await expect(installService(s, { run, signal: abort.signal })).rejects.toThrow(/abort/i);
    expect(calls).toEqual(['systemctl --user daemon-reload']);
  });
});
