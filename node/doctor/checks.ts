/**
 * `vtnode doctor`'s verdicts: each a pure function from facts gathered about this machine and its
 * node (node/doctor/gather.ts) to a check with a status, what was found and how to fix it.
 */
import type { Blocked } from '../../sandbox/reach.ts';
import type { ProbedServer } from '../models/probe.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skipped';

/** One line of the doctor's report. */
export interface Check {
  /** What was checked ("node", "sandbox", "model server http://…", "workspace /src/x", …). */
  name: string;
  status: CheckStatus;
  /** What was found (for `skipped`: why it was not checked). */
  detail: string;
  /** How to fix a warning or a failure; null when there is nothing to fix. */
  fix: string | null;
}

const check = (name: string, status: CheckStatus, detail: string, fix: string | null = null): Check => ({
  name,
  status,
  detail,
  fix,
});

const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** The oldest Node vtnode runs on (package.json engines). */
export const MIN_NODE: readonly [number, number] = [22, 18];

/** Node's version against MIN_NODE. */
export function checkNodeVersion(version: string): Check {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  const ok = major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
  return ok
    ? check('node', 'ok', `Node.js ${version}`)
    : check(
        'node',
        'fail',
        `Node.js ${version} is older than ${MIN_NODE.join('.')}`,
        `install Node.js ${MIN_NODE.join('.')} or later (or run \`npx vtnode\` inside the repository)`,
      );
}

/** Whether the data dir holds a node: its identity and its fleet. */
export function checkIdentity(facts: { dataDir: string; identity: boolean; fleet: string | null }): Check {
  if (facts.identity && facts.fleet !== null)
    return check('identity', 'ok', `${facts.dataDir}: a node of fleet "${facts.fleet}"`);
  return check(
    'identity',
    'fail',
    `${facts.dataDir} holds no node${facts.identity ? ' fleet (identity.key without fleet.json)' : ''}`,
    `run \`vtnode init --fleet NAME --data-dir ${facts.dataDir}\` or \`vtnode join TOKEN --data-dir ${facts.dataDir}\``,
  );
}

/** What gathering found about the sandbox. */
export interface SandboxFacts {
  /** process.platform. */
  platform: string;
  /** The node is configured to score without the sandbox. */
  unconfined: boolean;
  /** The platform backend's name when it could be created. */
  backend: string | null;
  /** Why the backend could not be created, or null. */
  unavailable: string | null;
  /** Its self-test, when it ran. */
  selfTest: { ok: boolean; checks: { name: string; ok: boolean; detail: string }[] } | null;
}

function installSandboxHint(platform: string): string {
  return platform === 'linux'
    ? 'install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`)'
    : platform === 'darwin'
      ? 'sandbox-exec is part of macOS: check that /usr/bin/sandbox-exec runs'
      : `no sandbox exists for ${platform}: score elsewhere, or run with --unconfined for trusted input only`;
}

/** The platform sandbox exists and its self-test's canaries were refused. */
export function checkSandbox(f: SandboxFacts): Check {
  if (f.unavailable !== null)
    return check('sandbox', f.unconfined ? 'warn' : 'fail', f.unavailable, installSandboxHint(f.platform));
  const failed = (f.selfTest?.checks ?? []).filter((c) => !c.ok);
  if (!f.selfTest?.ok)
    return check(
      'sandbox',
      f.unconfined ? 'warn' : 'fail',
      `the ${f.backend} sandbox failed its self-test: ${failed.map((c) => `${c.name}: ${c.detail}`).join('; ') || 'no result'}`,
      f.platform === 'linux'
        ? 'bubblewrap needs unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 an AppArmor profile for bwrap) or root'
        : 'check that sandbox-exec runs for this user',
    );
  const passed = `${f.backend}, self-test passed (${f.selfTest.checks.length} canaries refused)`;
  if (f.unconfined)
    return check(
      'sandbox',
      'warn',
      `this node scores WITHOUT the sandbox (--unconfined), although ${passed}`,
      'set "unconfined": false in the data dir\'s config.json, then restart the node',
    );
  return check('sandbox', 'ok', passed);
}

/** What gathering found about the paths a confined run reads, as the sandbox's uid sees them (root). */
export interface ReachFacts {
  /** Why it was not checked (runs keep the caller's uid when not root; no bwrap off Linux), or null. */
  skipped: string | null;
  /** The uid checked: the first of the sandbox's pool. */
  uid: number;
  /** Each path a run reads (the data dir's workspaces, each workspace, Node) and what stands in its way. */
  paths: { path: string; blocked: Blocked | null }[];
  /** unshare and setpriv (util-linux) are installed: a path under a closed folder can be staged. */
  stageTools: boolean;
}

/**
 * The sandbox's uid can read what its runs read: directly, or staged through a private mount
 * namespace when a folder above is closed (sandbox/reach.ts). A path closed itself, or a closed folder
 * without the tools to stage, fails every run as an infrastructure error: that is what this catches.
 */
export function checkReach(f: ReachFacts): Check {
  if (f.skipped !== null) return check('sandbox reach', 'skipped', f.skipped);
  const shut = f.paths.filter((p) => p.blocked?.at === 'self').map((p) => p.path);
  if (shut.length > 0)
    return check(
      'sandbox reach',
      'fail',
      `the sandbox's uid ${f.uid} cannot read ${shut.join(', ')}: every run there fails`,
      shut.map((p) => `\`chmod o+rX ${p}\``).join(', '),
    );
  const staged = f.paths.flatMap((p) => (p.blocked?.at === 'parent' ? [p.blocked] : []));
  if (staged.length === 0)
    return check(
      'sandbox reach',
      'ok',
      `the sandbox's uid ${f.uid} reaches ${f.paths.length} path(s) directly`,
    );
  const under = staged.map((b) => `${b.path} (under ${b.folder})`).join(', ');
  if (!f.stageTools)
    return check(
      'sandbox reach',
      'fail',
      `the sandbox's uid ${f.uid} cannot reach ${under}, and unshare or setpriv is missing to stage it`,
      'install util-linux, or keep the data dir and workspaces under folders others can search',
    );
  return check(
    'sandbox reach',
    'ok',
    `${under}: under a folder the sandbox's uid ${f.uid} cannot search; each run binds it through a private mount namespace (nothing on the host changes)`,
  );
}

/** One model server: its probe's result or error. */
export interface ServerFacts {
  url: string;
  /** The probe's result, or null when it failed. */
  server: ProbedServer | null;
  /** The probe's error. */
  error: string | null;
}

/** A configured model server answers and lists its models (and whether each is loaded). */
export function checkModelServer(f: ServerFacts): Check {
  const name = `model server ${f.url}`;
  if (!f.server)
    return check(
      name,
      'fail',
      `unreachable: ${f.error ?? 'no answer'}`,
      `start the server (e.g. \`ollama serve\`, \`llama-server -m MODEL --port PORT\`), or change --model-server`,
    );
  const s = f.server;
  const models = s.models.map((m) => `${m.id}${m.loaded ? ' (loaded)' : ''}`).join(', ');
  const what = `${s.kind}${s.version ? ` ${s.version}` : ''}, concurrency ${s.concurrency}`;
  if (s.models.length === 0)
    return check(name, 'warn', `${what}: serves no model`, 'load or pull a model on the server');
  return check(name, 'ok', `${what}: ${models}`);
}

/** No server configured: what auto-detection found on the well-known ports. */
export function checkDetectedServers(found: ProbedServer[], ports: readonly number[]): Check {
  if (found.length === 0)
    return check(
      'model servers',
      'warn',
      `none configured, and none answers on 127.0.0.1 ports ${ports.join(', ')} (this node takes no generation jobs)`,
      'start a local server (Ollama, llama-server, mlx_lm.server, LM Studio, vLLM), or pass `--model-server URL` to `vtnode start`',
    );
  const list = found.map(
    (s) => `${s.url} (${s.kind}: ${s.models.map((m) => m.id).join(', ') || 'no model'})`,
  );
  return check('model servers', 'ok', `detected ${list.join('; ')}`);
}

/** What gathering found about one workspace. */
export interface WorkspaceFacts {
  dir: string;
  /** The folder exists. */
  exists: boolean;
  /** The runner as the miner detects it from the package (null with `runnerError`). */
  runner: string | null;
  runnerError: string | null;
  /** Problems and fixes of sandbox/workspace-ready.ts (runner and declared dependencies resolve, packages built). */
  readiness: { ok: boolean; problems: string[]; fixes: { command: string; cwd: string }[] } | null;
  /** The TypeScript a type-check uses, or why none resolves. */
  typescript: { version: string; source: 'workspace' | 'vtnode' } | { error: string };
}

/** A workspace is built and scoreable: its runner, dependencies and type-checker resolve. */
export function checkWorkspace(f: WorkspaceFacts): Check {
  const name = `workspace ${f.dir}`;
  if (!f.exists)
    return check(
      name,
      'fail',
      'no such folder',
      `give the right folders: \`vtnode start --workspace DIR…\` replaces the saved list`,
    );
  if (f.readiness && !f.readiness.ok)
    return check(
      name,
      'fail',
      f.readiness.problems.join('; '),
      f.readiness.fixes.map((x) => `\`${x.command}\` in ${x.cwd}`).join(', then ') || null,
    );
  if ('error' in f.typescript)
    return check(
      name,
      'fail',
      `no type-checker: ${f.typescript.error}`,
      `\`npm i -D typescript\` in ${f.dir}`,
    );
  const tsc = `typescript ${f.typescript.version}${f.typescript.source === 'vtnode' ? " (vtnode's own: the workspace has none)" : ''}`;
  if (f.runner === null)
    return check(
      name,
      'warn',
      `${f.runnerError ?? 'no test runner found'}; ${tsc}`,
      'mine it (`vtnode mine --root DIR`): the miner says which runner it needs',
    );
  return check(name, 'ok', `${f.runner} and its dependencies resolve; ${tsc}`);
}

/** One TCP port the node listens on, and who has it. */
export interface PortFacts {
  /** The listen multiaddr it comes from. */
  addr: string;
  port: number;
  /** Bindable now. */
  free: boolean;
  /** This data dir's daemon runs and advertises this port. */
  heldByDaemon: boolean;
  /** The listen address is the default (any free port is taken when it is busy). */
  fallback: boolean;
}

/** A listen port is free, or held by this node's own daemon. */
export function checkPort(f: PortFacts): Check {
  const name = `port ${f.port}`;
  if (f.heldByDaemon) return check(name, 'ok', `held by this node's running daemon (${f.addr})`);
  if (f.free) return check(name, 'ok', `free (${f.addr})`);
  if (f.fallback)
    return check(
      name,
      'warn',
      `taken by another process: the node would listen on another port, one tokens do not name`,
      `stop what holds ${f.port} (\`lsof -i :${f.port}\`), or choose a port with \`--listen /ip4/0.0.0.0/tcp/PORT\``,
    );
  return check(
    name,
    'fail',
    `taken by another process: \`vtnode start\` cannot listen on ${f.addr}`,
    `stop what holds ${f.port} (\`lsof -i :${f.port}\`), or choose another port with \`vtnode start --listen /ip4/0.0.0.0/tcp/PORT\``,
  );
}

/**
 * TCP ports of listen multiaddrs (`/ip4/H/tcp/N`, `/ip6/H/tcp/N`) with the host to bind them on;
 * port 0 (any) and non-TCP addresses are left out.
 */
export function tcpPorts(listen: readonly string[]): { addr: string; host: string; port: number }[] {
  const out: { addr: string; host: string; port: number }[] = [];
  for (const addr of listen) {
    const m = /^\/ip[46]\/([^/]+)\/tcp\/(\d+)(\/|$)/.exec(addr);
    const port = m ? Number(m[2]) : 0;
    if (port > 0 && port < 65536) out.push({ addr, host: m![1]!, port });
  }
  return out;
}

/** Below this free space doctor warns: samples, campaigns and datasets grow. */
export const DISK_WARN_BYTES = GiB;

/** Free space on the data dir's disk against the node's reserve (node/storage/disk-guard.ts). */
export function checkDisk(f: { dir: string; freeBytes: number; minFreeBytes: number }): Check {
  const free =
    f.freeBytes >= GiB ? `${(f.freeBytes / GiB).toFixed(1)} GiB` : `${(f.freeBytes / MiB).toFixed(0)} MiB`;
  if (f.freeBytes < f.minFreeBytes)
    return check(
      'disk',
      'fail',
      `${free} free on the disk of ${f.dir}, below the ${(f.minFreeBytes / MiB).toFixed(0)} MiB a node keeps in reserve: it takes no jobs`,
      'free space on that disk, or move the data dir (--data-dir) to a larger one',
    );
  if (f.freeBytes < DISK_WARN_BYTES)
    return check(
      'disk',
      'warn',
      `${free} free on the disk of ${f.dir}`,
      'free space: sample logs and datasets grow with every campaign',
    );
  return check('disk', 'ok', `${free} free on the disk of ${f.dir}`);
}

/** One peer's newest advert as this node's daemon saw it. */
export interface PeerClock {
  peerId: string;
  host: string | null;
  /** The peer's clock when it sent the advert, ms since epoch. */
  sentAt: number;
  /** This machine's clock when the advert arrived, ms since epoch. */
  receivedAt: number;
}

/** Clock difference above which doctor warns, ms (gossip takes well under a second). */
export const SKEW_WARN_MS = 30_000;

/**
 * Clock skew against the fleet from the peers' adverts: (arrival here) − (sent there), which also
 * counts the gossip delay. Beyond `maxSkewMs` (membership's tolerance) members refuse this node's
 * certificates and records as issued in the future, or see theirs so.
 */
export function checkClock(f: { daemon: boolean; peers: PeerClock[]; maxSkewMs: number }): Check {
  if (!f.daemon)
    return check(
      'clock',
      'skipped',
      "no daemon runs for this data dir: the skew is measured on the fleet's adverts it receives (`vtnode start`, then run doctor again)",
    );
  if (f.peers.length === 0)
    return check('clock', 'skipped', 'no other node is in view: nothing to compare with');
  const skews = f.peers.map((p) => ({ p, skew: p.receivedAt - p.sentAt }));
  const worst = skews.reduce((a, b) => (Math.abs(b.skew) > Math.abs(a.skew) ? b : a));
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const who = `${worst.p.host ?? worst.p.peerId.slice(-8)}`;
  const detail = `largest difference ${s(Math.abs(worst.skew))} (${who} is ${worst.skew >= 0 ? 'behind' : 'ahead of'} this machine), over ${f.peers.length} node${f.peers.length === 1 ? '' : 's'}`;
  const fix =
    'synchronise the clocks (NTP: `timedatectl set-ntp true` on Linux, Settings › Date & Time on macOS)';
  if (Math.abs(worst.skew) > f.maxSkewMs)
    return check('clock', 'fail', `${detail}: beyond the ${s(f.maxSkewMs)} membership tolerates`, fix);
  if (Math.abs(worst.skew) > SKEW_WARN_MS) return check('clock', 'warn', detail, fix);
  return check('clock', 'ok', detail);
}

/** The exit code: 1 when any check failed. */
export function doctorExitCode(checks: readonly Check[]): number {
  return checks.some((c) => c.status === 'fail') ? 1 : 0;
}

/** The report for a terminal: one line per check, its fix under it. */
export function renderChecks(checks: readonly Check[]): string {
  const mark: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skipped: 'skip' };
  const lines: string[] = [];
  for (const c of checks) {
    lines.push(`${mark[c.status]}  ${c.name}: ${c.detail}`);
    if (c.fix && c.status !== 'ok') lines.push(`      fix: ${c.fix}`);
  }
  const failed = checks.filter((c) => c.status === 'fail').length;
  const warned = checks.filter((c) => c.status === 'warn').length;
  lines.push(
    '',
    failed + warned === 0
      ? 'all checks passed'
      : `${failed} failed, ${warned} warning${warned === 1 ? '' : 's'}`,
  );
  return `${lines.join('\n')}\n`;
}
