import { existsSync, realpathSync, statSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import type { CommandRunner } from '../../node/service/manager.ts';
import {
  launchdLabel,
  planInstall,
  planUninstall,
  type ServiceSpec,
  serviceName,
  servicePath,
  systemdUnitPath,
} from '../../node/service/units.ts';
import { CliError, type Command } from '../command.ts';
import { commandLine, DATA_DIR, flag, group, string, usageError } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode service install|uninstall|status [options]

Makes the node of a data dir a service of this machine's init system, so it starts at boot (at login
for a macOS LaunchAgent) and restarts when it fails (not after \`vtnode leave\`):
  macOS  a launchd LaunchAgent in ~/Library/LaunchAgents (logs in ~/Library/Logs/vtnode), or with
         --system a LaunchDaemon in /Library/LaunchDaemons (logs in /Library/Logs/vtnode)
  Linux  a systemd user unit in ~/.config/systemd/user (lingering turned on, so it starts at boot),
         or with --system a unit in /etc/systemd/system with User=; logs in the journal
The service runs \`vtnode start --data-dir DIR\` with this Node binary and this vtnode, by absolute
path; run \`vtnode init\` or \`vtnode join\` first.`,
  groups: [
    group('Options:', {
      'data-dir': DATA_DIR,
      system: flag({ doc: 'a system service instead of a per-user one (needs root)' }),
      'user-name': string({
        doc: 'with --system: the user the node runs as (default $SUDO_USER, else you)',
        value: 'NAME',
      }),
      'dry-run': flag({ doc: 'print the file and the commands, change nothing' }),
      json: flag({
        doc: 'print one JSON object: status { installed, enabled, running, pid, detail }; install and uninstall what they did (or would do with --dry-run)',
      }),
    }),
  ],
  epilogue: `\`status\` exits 0 when the service is installed and running, 1 otherwise.`,
  positionals: true,
});

/** systemd's version from `systemctl --version` ("systemd 252 (252.38-1)"), or null. */
export function parseSystemdVersion(text: string): number | null {
  const m = /^systemd (\d+)/m.exec(text);
  return m ? Number(m[1]) : null;
}

async function buildSpec(
  values: { 'data-dir'?: string | undefined; system?: boolean | undefined; 'user-name'?: string | undefined },
  run: CommandRunner,
): Promise<ServiceSpec> {
  const platform = process.platform;
  if (platform !== 'darwin' && platform !== 'linux')
    throw new CliError(`vtnode service supports macOS (launchd) and Linux (systemd), not ${platform}`);
  if (values['user-name'] !== undefined && !values.system)
    throw new CliError('--user-name goes with --system (a per-user service runs as you)', 2);
  const { resolveDataDir } = await import('../../node/data-dir.ts');
  const dataDir = resolveDataDir(values['data-dir']);
  const me = userInfo();
  const user = values.system ? (values['user-name'] ?? process.env['SUDO_USER'] ?? me.username) : me.username;
  const uid =
    user === me.username ? me.uid : user === process.env['SUDO_USER'] ? Number(process.env['SUDO_UID']) : -1;
  const node = realpathSync(process.execPath);
  const entry = realpathSync(process.argv[1]!);
  const systemdVersion =
    platform === 'linux' ? parseSystemdVersion((await run(['systemctl', '--version'])).stdout) : null;
  return {
    platform,
    scope: values.system ? 'system' : 'user',
    node,
    entry,
    dataDir,
    name: serviceName(dataDir, resolveDataDir()),
    home: homedir(),
    user,
    uid,
    path: servicePath(node, process.env['PATH']),
    systemdVersion,
  };
}

/** Refuses a data dir that has no node yet, or (system service) that the service's user does not own. */
async function refuseUnusableDataDir(spec: ServiceSpec): Promise<void> {
  const { DataDir } = await import('../../node/data-dir.ts');
  const dataDir = new DataDir(spec.dataDir);
  const fleet = await dataDir.readFleet();
  if (!fleet || !existsSync(dataDir.path('identity.key')))
    throw new CliError(
      `${spec.dataDir} has no node identity: run \`vtnode init --fleet NAME\` or \`vtnode join TOKEN\` with this data dir first`,
    );
  if (spec.scope === 'system' && spec.uid >= 0) {
    const owner = statSync(spec.dataDir).uid;
    if (owner !== spec.uid)
      throw new CliError(
        `the service would run as ${spec.user} (uid ${spec.uid}) but ${spec.dataDir} belongs to uid ${owner}: pass --user-name, or --data-dir of that user's node`,
      );
  }
}

function describe(spec: ServiceSpec): string {
  return spec.platform === 'darwin'
    ? `launchd ${spec.scope === 'user' ? 'agent' : 'daemon'} ${launchdLabel(spec.name)}`
    : `systemd ${spec.scope} unit ${spec.name}.service`;
}

/** How install and uninstall report: on stdout as text, or as one JSON object (--json). */
interface Report {
  dryRun: boolean;
  json: boolean;
}

/** Writes `text`, or `object` as one JSON line with --json. */
function say(report: Report, text: string, object: Record<string, unknown>): void {
  process.stdout.write(report.json ? `${JSON.stringify({ ...object, dryRun: report.dryRun })}\n` : text);
}

async function install(spec: ServiceSpec, report: Report, run: CommandRunner): Promise<number> {
  await refuseUnusableDataDir(spec);
  const plan = (() => {
    try {
      return planInstall(spec);
    } catch (err) {
      throw new CliError((err as Error).message);
    }
  })();
  const planned = {
    action: 'install',
    service: describe(spec),
    file: plan.file.path,
    runs: [spec.node, spec.entry, 'start', '--data-dir', spec.dataDir],
    logs: plan.logs,
  };
  if (report.dryRun) {
    const commands = plan.commands.map(
      (c) => `${c.argv.join(' ')}${c.mayFail ? '   # may fail: not loaded' : ''}`,
    );
    say(report, `# ${plan.file.path}\n${plan.file.text}\n# then:\n${commands.join('\n')}\n`, {
      ...planned,
      text: plan.file.text,
      commands: plan.commands.map((c) => ({ argv: c.argv, mayFail: c.mayFail ?? false })),
    });
    return 0;
  }
  const { installService } = await import('../../node/service/manager.ts');
  await withAccessHint(spec, () => installService(spec, { run }));
  say(
    report,
    `installed the ${describe(spec)}: ${plan.file.path}\n` +
      `  runs  ${spec.node} ${spec.entry} start --data-dir ${spec.dataDir}\n` +
      `  logs  ${plan.logs}\n` +
      `  \`vtnode service status${spec.scope === 'system' ? ' --system' : ''}\` says whether it runs; \`vtnode service uninstall\` removes it.\n`,
    { ...planned, installed: true },
  );
  return 0;
}

async function uninstall(spec: ServiceSpec, report: Report, run: CommandRunner): Promise<number> {
  const plan = planUninstall(spec);
  const planned = { action: 'uninstall', service: describe(spec), file: plan.file };
  if (report.dryRun) {
    const lines = [
      ...plan.before.map((c) => c.argv.join(' ')),
      `rm ${plan.file}`,
      ...plan.after.map((c) => c.argv.join(' ')),
    ];
    say(report, `${lines.join('\n')}\n`, { ...planned, commands: lines });
    return 0;
  }
  const { uninstallService } = await import('../../node/service/manager.ts');
  const was = await withAccessHint(spec, () => uninstallService(spec, { run }));
  say(
    report,
    was ? `removed the ${describe(spec)}: ${plan.file}\n` : `no ${describe(spec)} was installed\n`,
    { ...planned, removed: was },
  );
  return 0;
}

async function status(spec: ServiceSpec, json: boolean, run: CommandRunner): Promise<number> {
  const { readServiceStatus } = await import('../../node/service/manager.ts');
  const s = await readServiceStatus(spec, { run });
  if (json) process.stdout.write(`${JSON.stringify(s)}\n`);
  else {
    const file = spec.platform === 'darwin' ? planUninstall(spec).file : systemdUnitPath(spec);
    process.stdout.write(
      `${describe(spec)}: ${s.installed ? `installed (${file})` : 'not installed'}, ${s.enabled ? 'enabled' : 'not enabled'}, ${s.running ? `running${s.pid ? ` (pid ${s.pid})` : ''}` : 'not running'}\n  ${s.detail}\n`,
    );
  }
  return s.installed && s.running ? 0 : 1;
}

/** A permission error on a system service's file says to use sudo. */
async function withAccessHint<T>(spec: ServiceSpec, fn: () => Promise<T>): Promise<T> {
  const { ServiceCommandError } = await import('../../node/service/manager.ts');
  try {
    return await fn();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM')
      throw new CliError(
        `${(err as Error).message}${spec.scope === 'system' ? ' (a system service needs root: run it with sudo)' : ''}`,
      );
    if (err instanceof ServiceCommandError) throw new CliError(err.message);
    throw err;
  }
}

export const command: Command = {
  name: 'service',
  summary: 'install this node as a launchd/systemd service (starts at boot)',
  usage: line.usage,
  line,
  async run(argv) {
    const { values, positionals } = line.parse(argv);
    const [action, ...extra] = positionals;
    if (extra.length > 0 || (action !== 'install' && action !== 'uninstall' && action !== 'status'))
      throw usageError('expected install, uninstall or status', line.usage);
    const { execRunner } = await import('../../node/service/manager.ts');
    const spec = await buildSpec(values, execRunner);
    const report = { dryRun: values['dry-run'] ?? false, json: values.json ?? false };
    if (action === 'install') return install(spec, report, execRunner);
    if (action === 'uninstall') return uninstall(spec, report, execRunner);
    return status(spec, values.json ?? false, execRunner);
  },
};
