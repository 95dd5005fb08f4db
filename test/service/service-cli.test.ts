import { execFile, execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, Sandbox, vtnode } from '../helpers/cli.ts';

const box = new Sandbox();
afterAll(() => box.cleanup());

const hasAnalyze = (() => {
  try {
    execFileSync('systemd-analyze', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('vtnode service', () => {
  it('refuses a data dir without a node, naming init and join', async () => {
    const home = await box.tempDir();
    const r = await vtnode(['service', 'install', '--dry-run', '--data-dir', join(home, 'empty')], {
      env: { HOME: home },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('has no node identity: run `vtnode init --fleet NAME` or `vtnode join TOKEN`');
  });

  it('rejects an unknown action and --user-name without --system (exit 2)', async () => {
    expect((await vtnode(['service', 'restart'])).code).toBe(2);
    const r = await vtnode(['service', 'status', '--user-name', 'bob']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--user-name goes with --system');
  });

  it.runIf(process.platform === 'linux')(
    '--dry-run prints a unit that runs this node and this vtnode by absolute path, and changes nothing',
    async () => {
      const home = await box.tempDir('vt service home ');
      const dataDir = join(home, 'my node');
      const init = await vtnode(['init', '--fleet', 'svc', '--data-dir', dataDir], { env: { HOME: home } });
      expect(init.code, init.stderr).toBe(0);
      const r = await vtnode(['service', 'install', '--dry-run', '--data-dir', dataDir], {
        env: { HOME: home },
      });
      expect(r.code, r.stderr).toBe(0);
      const [head, ...rest] = r.stdout.split('\n');
      expect(head).toMatch(new RegExp(`^# ${home}/\\.config/systemd/user/vtnode-[0-9a-f]{8}\\.service$`));
      const unit = rest.join('\n').split('# then:')[0]!;
      expect(unit).toContain(
        `ExecStart=${realpathSync(process.execPath)} ${realpathSync(BIN)} start --data-dir "${dataDir}"`,
      );
      expect(r.stdout).toMatch(/# then:\nsystemctl --user daemon-reload\n/);
      // --json: the same plan as one object (issue 28, finding 9: it was ignored).
      const json = await vtnode(['service', 'install', '--dry-run', '--json', '--data-dir', dataDir], {
        env: { HOME: home },
      });
      expect(json.code, json.stderr).toBe(0);
      const plan = JSON.parse(json.stdout) as {
        file: string;
        text: string;
        dryRun: boolean;
        commands: unknown[];
      };
      expect(plan).toMatchObject({ action: 'install', dryRun: true, file: head!.slice(2) });
      expect(unit.startsWith(plan.text)).toBe(true);
      expect(plan.commands[0]).toEqual({ argv: ['systemctl', '--user', 'daemon-reload'], mayFail: false });
      const gone = await vtnode(['service', 'uninstall', '--dry-run', '--json', '--data-dir', dataDir], {
        env: { HOME: home },
      });
      expect(JSON.parse(gone.stdout)).toMatchObject({ action: 'uninstall', dryRun: true, file: plan.file });
      // Nothing written.
      const status = await vtnode(['service', 'status', '--json', '--data-dir', dataDir], {
        env: { HOME: home },
      });
      expect(JSON.parse(status.stdout)).toMatchObject({ installed: false, running: false });
      expect(status.code).toBe(1);
      if (!hasAnalyze) return; // systemd-analyze missing: the unit text was checked above only
      const file = join(home, 'vtnode-test.service');
      await writeFile(file, unit);
      const verified = await promisify(execFile)('systemd-analyze', ['verify', file]);
      expect(verified.stderr).toBe('');
    },
  );
});
