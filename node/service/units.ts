/**
 * The files and commands that make a node a service of the platform's init system: a launchd
 * property list (macOS) or a systemd unit (Linux), and the launchctl/systemctl calls that load,
 * unload and inspect it. Pure: no I/O, no process state; node/service/manager.ts runs the plans.
 */
import { createHash } from 'node:crypto';
import { posix } from 'node:path';

/** What the service runs and where, as the CLI resolved it (every path absolute). */
export interface ServiceSpec {
  /** `darwin` → launchd, `linux` → systemd. */
  platform: 'darwin' | 'linux';
  /** A per-user service (LaunchAgent, `systemctl --user`) or a system one (LaunchDaemon, /etc/systemd/system). */
  scope: 'user' | 'system';
  /** Absolute path of the Node binary that runs vtnode. */
  node: string;
  /** Absolute path of vtnode's entry script (package.json `bin`). */
  entry: string;
  /** Absolute path of the node's data dir. */
  dataDir: string;
  /** Service name: `vtnode`, or `vtnode-<hash>` for a data dir other than the default (serviceName). */
  name: string;
  /** Home folder of the user the service runs as (LaunchAgents, logs, ~/.config/systemd/user). */
  home: string;
  /** User the service runs as: its name (systemd `User=`, launchd `UserName` of a system service). */
  user: string;
  /** That user's uid (launchd's `gui/<uid>` domain). */
  uid: number;
  /** PATH the service gets (the node binary's folder first), so git, bwrap and the like resolve. */
  path: string;
  /** systemd's version (`systemctl --version`); restart back-off needs 254 or later. Null: unknown. */
  systemdVersion: number | null;
}

/** One command of a plan. */
export interface PlannedCommand {
  /** Program and arguments (run without a shell). */
  argv: string[];
  /** True when a failure is expected and harmless (unloading a service that is not loaded). */
  mayFail: boolean;
}

/** What `service install` does: folders to create, the file to write, then the commands. */
export interface InstallPlan {
  /** The unit or property-list file. */
  file: { path: string; text: string };
  /** Folders to create first (the file's, the log folder). */
  dirs: string[];
  commands: PlannedCommand[];
  /** How to read the service's logs, for the user. */
  logs: string;
}

/** What `service uninstall` does: commands before removing the file, the file, commands after. */
export interface UninstallPlan {
  before: PlannedCommand[];
  file: string;
  after: PlannedCommand[];
}

/** Paths vtnode refuses to put in a unit: no control characters (a newline would end the line). */
export function checkServicePath(value: string, what: string): void {
  if (/[\u0000-\u001f\u007f]/.test(value))
    throw new Error(`${what} ${JSON.stringify(value)}: contains a control character`);
  if (!posix.isAbsolute(value)) throw new Error(`${what} ${JSON.stringify(value)}: not an absolute path`);
}

/** `vtnode` for the default data dir, else `vtnode-` and 8 hex digits of its path (two nodes, two services). */
export function serviceName(dataDir: string, defaultDataDir: string): string {
  if (dataDir === defaultDataDir) return 'vtnode';
  return `vtnode-${createHash('sha256').update(dataDir).digest('hex').slice(0, 8)}`;
}

/** launchd label of a service. */
export function launchdLabel(name: string): string {
  return `dev.${name}`;
}

/** The PATH a service gets: the Node binary's folder, then the installing shell's PATH, without repeats. */
export function servicePath(node: string, envPath: string | undefined): string {
  const dirs = [posix.dirname(node), ...(envPath ?? '').split(':'), '/usr/local/bin', '/usr/bin', '/bin'];
  return [...new Set(dirs.filter((d) => posix.isAbsolute(d)))].join(':');
}

/** The command line the service runs. */
export function serviceArgv(spec: ServiceSpec): string[] {
  return [spec.node, spec.entry, 'start', '--data-dir', spec.dataDir];
}

// ---- launchd ----

/** Escapes text for an XML element. */
export function xmlEscape(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/** Where launchd keeps the file and the logs of a service. */
export function launchdPaths(spec: ServiceSpec): { plist: string; logDir: string; log: string } {
  const label = launchdLabel(spec.name);
  const plist =
    spec.scope === 'user'
      ? posix.join(spec.home, 'Library', 'LaunchAgents', `${label}.plist`)
      : posix.join('/Library', 'LaunchDaemons', `${label}.plist`);
  const logDir =
    spec.scope === 'user' ? posix.join(spec.home, 'Library', 'Logs', 'vtnode') : '/Library/Logs/vtnode';
  return { plist, logDir, log: posix.join(logDir, `${spec.name}.log`) };
}

/**
 * The property list: runs `vtnode start` at load (login for an agent, boot for a daemon) and again
 * whenever it exits with a failure (not after `vtnode leave`, which exits 0), at most every 10 s.
 */
export function launchdPlist(spec: ServiceSpec): string {
  const { log } = launchdPaths(spec);
  const s = (v: string) => `<string>${xmlEscape(v)}</string>`;
  const lines = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    '<dict>',
    `  <key>Label</key>${s(launchdLabel(spec.name))}`,
    '  <key>ProgramArguments</key>',
    '  <array>',
    ...serviceArgv(spec).map((a) => `    ${s(a)}`),
    '  </array>',
    '  <key>EnvironmentVariables</key>',
    '  <dict>',
    `    <key>PATH</key>${s(spec.path)}`,
    '  </dict>',
    ...(spec.scope === 'system' ? [`  <key>UserName</key>${s(spec.user)}`] : []),
    '  <key>RunAtLoad</key><true/>',
    '  <key>KeepAlive</key>',
    '  <dict>',
    '    <key>SuccessfulExit</key><false/>',
    '  </dict>',
    '  <key>ThrottleInterval</key><integer>10</integer>',
    '  <key>ExitTimeOut</key><integer>30</integer>',
    `  <key>StandardOutPath</key>${s(log)}`,
    `  <key>StandardErrorPath</key>${s(log)}`,
    '</dict>',
    '</plist>',
  ];
  return `${lines.join('\n')}\n`;
}

/** launchctl's domain of the service: `gui/<uid>` for an agent, `system` for a daemon. */
function launchdDomain(spec: ServiceSpec): string {
  return spec.scope === 'user' ? `gui/${spec.uid}` : 'system';
}

// ---- systemd ----

/**
 * Quotes one word of a systemd command line or assignment: in double quotes, with `\` and `"`
 * escaped, `%` doubled (specifiers) and, for ExecStart, `$` doubled (variable expansion).
 */
export function systemdQuote(word: string, options: { exec: boolean }): string {
  let out = word.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%');
  if (options.exec) out = out.replace(/\$/g, '$$$$');
  return `"${out}"`;
}

/** A word of ExecStart: bare when it is plain (letters, digits, `/._-+=:,@`), else quoted (systemdQuote). */
export function systemdExecWord(word: string): string {
  return /^[A-Za-z0-9/._+=:,@-]+$/.test(word) ? word : systemdQuote(word, { exec: true });
}

/** The unit's path: ~/.config/systemd/user for a user service, /etc/systemd/system for a system one. */
export function systemdUnitPath(spec: ServiceSpec): string {
  const dir =
    spec.scope === 'user' ? posix.join(spec.home, '.config', 'systemd', 'user') : '/etc/systemd/system';
  return posix.join(dir, `${spec.name}.service`);
}

/** systemd 254 added RestartSteps/RestartMaxDelaySec (exponential back-off). */
export const SYSTEMD_BACKOFF_VERSION = 254;

/**
 * The unit: runs `vtnode start` at boot (a user service needs lingering, which install turns on),
 * restarts it when it fails (not after `vtnode leave`, which exits 0), with a back-off from 5 s to
 * 5 min where systemd has it; logs go to the journal.
 */
export function systemdUnit(spec: ServiceSpec): string {
  const backoff = spec.systemdVersion !== null && spec.systemdVersion >= SYSTEMD_BACKOFF_VERSION;
  const exec = serviceArgv(spec).map(systemdExecWord).join(' ');
  const lines = [
    '[Unit]',
    `Description=vtnode node (data dir ${spec.dataDir.replace(/%/g, '%%')})`,
    ...(spec.scope === 'system' ? ['Wants=network-online.target', 'After=network-online.target'] : []),
    // With a back-off the restarts are spaced out: never give up. Without it systemd's default
    // limit (5 starts in 10 s) never trips at one start every 10 s.
    ...(backoff ? ['StartLimitIntervalSec=0'] : []),
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${exec}`,
    `Environment=${systemdQuote(`PATH=${spec.path}`, { exec: false })}`,
    ...(spec.scope === 'system' ? [`User=${spec.user}`] : []),
    'Restart=on-failure',
    ...(backoff ? ['RestartSec=5s', 'RestartSteps=10', 'RestartMaxDelaySec=5min'] : ['RestartSec=10s']),
    'KillSignal=SIGTERM',
    'TimeoutStopSec=30s',
    '',
    '[Install]',
    `WantedBy=${spec.scope === 'user' ? 'default.target' : 'multi-user.target'}`,
  ];
  return `${lines.join('\n')}\n`;
}

function systemctl(spec: ServiceSpec, ...args: string[]): string[] {
  return spec.scope === 'user' ? ['systemctl', '--user', ...args] : ['systemctl', ...args];
}

// ---- plans ----

const must = (argv: string[]): PlannedCommand => ({ argv, mayFail: false });
const may = (argv: string[]): PlannedCommand => ({ argv, mayFail: true });

/** User names systemd accepts in `User=` (and launchd in `UserName`). */
const USER_NAME = /^[a-z_][a-z0-9_.-]*\$?$/i;

/** The install plan of a spec; throws on a path or user name that cannot go in the file. */
export function planInstall(spec: ServiceSpec): InstallPlan {
  for (const [value, what] of [
    [spec.node, 'node binary'],
    [spec.entry, 'vtnode entry'],
    [spec.dataDir, 'data dir'],
    [spec.home, 'home'],
  ] as const)
    checkServicePath(value, what);
  if (!USER_NAME.test(spec.user)) throw new Error(`user ${JSON.stringify(spec.user)}: not a user name`);
  if (spec.platform === 'darwin') {
    const { plist, logDir } = launchdPaths(spec);
    const domain = launchdDomain(spec);
    const target = `${domain}/${launchdLabel(spec.name)}`;
    return {
      file: { path: plist, text: launchdPlist(spec) },
      dirs: [posix.dirname(plist), logDir],
      commands: [
        // A service loaded before (an earlier install) is unloaded first, so the new file counts.
        may(['launchctl', 'bootout', target]),
        must(['launchctl', 'enable', target]),
        must(['launchctl', 'bootstrap', domain, plist]),
      ],
      logs: `tail -f ${launchdPaths(spec).log}`,
    };
  }
  const unit = systemdUnitPath(spec);
  const unitName = posix.basename(unit);
  return {
    file: { path: unit, text: systemdUnit(spec) },
    dirs: [posix.dirname(unit)],
    commands: [
      must(systemctl(spec, 'daemon-reload')),
      must(systemctl(spec, 'enable', unitName)),
      // A running service (an earlier install) restarts with the new unit; a stopped one starts.
      must(systemctl(spec, 'restart', unitName)),
      // A user's services start at boot only when the user lingers.
      ...(spec.scope === 'user' ? [must(['loginctl', 'enable-linger', spec.user])] : []),
    ],
    logs: `journalctl${spec.scope === 'user' ? ' --user' : ''} -u ${unitName} -f`,
  };
}

/** The uninstall plan: stop and unload, remove the file, reload systemd. */
export function planUninstall(spec: ServiceSpec): UninstallPlan {
  if (spec.platform === 'darwin') {
    const { plist } = launchdPaths(spec);
    return {
      before: [may(['launchctl', 'bootout', `${launchdDomain(spec)}/${launchdLabel(spec.name)}`])],
      file: plist,
      after: [],
    };
  }
  const unit = systemdUnitPath(spec);
  return {
    before: [may(systemctl(spec, 'disable', '--now', posix.basename(unit)))],
    file: unit,
    after: [must(systemctl(spec, 'daemon-reload'))],
  };
}

/** The commands whose answers `service status` reads (see serviceStatus). */
export function statusCommands(spec: ServiceSpec): string[][] {
  if (spec.platform === 'darwin')
    return [['launchctl', 'print', `${launchdDomain(spec)}/${launchdLabel(spec.name)}`]];
  const unitName = posix.basename(systemdUnitPath(spec));
  return [systemctl(spec, 'is-enabled', unitName), systemctl(spec, 'is-active', unitName)];
}

/** A command's answer. */
export interface CommandResult {
  /** Exit code (null when killed by a signal). */
  code: number | null;
  stdout: string;
  stderr: string;
}

/** What `service status` says. */
export interface ServiceStatus {
  /** The unit or property-list file exists. */
  installed: boolean;
  /** It starts at boot/login: systemd `enabled`; launchd: loaded in its domain. */
  enabled: boolean;
  /** Its process runs now. */
  running: boolean;
  /** The process id, when running and the init system says. */
  pid: number | null;
  /** What the init system said, one line. */
  detail: string;
}

/** What systemctl said when it gave no state at all (no systemd, no user bus, no such unit). */
function noAnswer(answers: CommandResult[]): string {
  const said = answers.map((a) => a.stderr.trim().split('\n')[0] ?? '').find((l) => l !== '');
  const code = answers[0]?.code;
  return `systemd gave no state: ${said ?? (code === null || code === undefined ? 'no result' : `systemctl exited ${code}`)}`;
}

/** Reads the answers of statusCommands (same order) into a status. */
export function serviceStatus(
  spec: ServiceSpec,
  installed: boolean,
  answers: CommandResult[],
): ServiceStatus {
  if (spec.platform === 'darwin') {
    const print = answers[0];
    const loaded = print?.code === 0;
    const state = /^\s*state = (.+)$/m.exec(print?.stdout ?? '')?.[1]?.trim() ?? null;
    const pid = /^\s*pid = (\d+)$/m.exec(print?.stdout ?? '')?.[1];
    return {
      installed,
      enabled: loaded,
      running: state === 'running',
      pid: pid ? Number(pid) : null,
      detail: loaded ? `launchd: state ${state ?? 'unknown'}` : 'launchd: not loaded',
    };
  }
  const enabled = (answers[0]?.stdout ?? '').trim();
  const active = (answers[1]?.stdout ?? '').trim();
  return {
    installed,
    enabled: enabled === 'enabled',
    running: active === 'active',
    pid: null,
    detail:
      enabled || active ? `systemd: ${enabled || 'unknown'}, ${active || 'unknown'}` : noAnswer(answers),
  };
}
