import { type ChildProcess, execFile } from 'node:child_process';
import { lstat, readlink } from 'node:fs/promises';
import { promisify } from 'node:util';
import {
  BackendUnavailableError,
  type Confinement,
  type RunResult,
  type RunSpec,
  type SelfTestResult,
  type SpawnedProcess,
  type SpawnSpec,
} from './confinement.ts';
import { runGroup } from './group-run.ts';
import { asRunLimits, type Limits, type ProcessLimits } from './limits.ts';
import { sandboxLog } from './log.ts';
import { listProcesses, type ProcInfo, pidNamespace, processesInNamespace, processTree } from './procfs.ts';
import { runSelfTest } from './self-test.ts';
import { spawnGroup } from './spawn-group.ts';
import { createUidPool, type UidPool } from './uid-pool.ts';

const log = sandboxLog('vtnode:sandbox:bwrap');
const execFileAsync = promisify(execFile);

/** Host paths the sandbox sees read-only (when they exist): the dynamic loader, libraries, /usr tools. */
export const SYSTEM_PATHS = [
  '/usr',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/alternatives',
  '/etc/passwd',
  '/etc/group',
  '/etc/nsswitch.conf',
  '/etc/localtime',
  '/etc/hosts',
];

/** A system path as found on the host: bound read-only, or recreated as the same symlink. */
export type SystemPath = { path: string; kind: 'bind' } | { path: string; kind: 'symlink'; target: string };

/** What the installed bubblewrap supports. */
export interface BwrapFeatures {
  /** `--disable-userns` (0.8.0+): no nested user namespaces. */
  disableUserns: boolean;
  /** `--size` for tmpfs (0.8.0+). */
  tmpfsSize: boolean;
}

/** Everything the argv depends on; `bwrapArgv` is pure so its output can be snapshot-tested. */
export interface BwrapPlan {
  /** Absolute path of bwrap. */
  bwrap: string;
  /** Absolute path of prlimit (applies the rlimits inside the sandbox). */
  prlimit: string;
  features: BwrapFeatures;
  system: SystemPath[];
  /** Read-only binds (deduplicated, absolute). */
  readOnly: string[];
  box: string;
  cwd: string;
  env: Record<string, string>;
  limits: Limits;
  /** Size of the private /tmp tmpfs, bytes. */
  tmpBytes: number;
  argv: string[];
}

/** Parses `bubblewrap 0.8.0` into features. */
export function bwrapFeatures(versionText: string): BwrapFeatures & { version: string } {
  const m = /(\d+)\.(\d+)\.(\d+)/.exec(versionText);
  if (!m)
    throw new BackendUnavailableError(`cannot read the bubblewrap version from "${versionText.trim()}"`);
  const [maj, min] = [Number(m[1]), Number(m[2])];
  const atLeast08 = maj > 0 || min >= 8;
  return { version: m[0], disableUserns: atLeast08, tmpfsSize: atLeast08 };
}

/** Removes paths already covered by another path in the list, keeps order otherwise. */
export function dedupePaths(paths: string[]): string[] {
  const sorted = [...new Set(paths)].sort((a, b) => a.length - b.length);
  const kept: string[] = [];
  for (const p of sorted)
    if (!kept.some((k) => p === k || p.startsWith(k.endsWith('/') ? k : `${k}/`))) kept.push(p);
  return paths.filter((p, i) => kept.includes(p) && paths.indexOf(p) === i);
}

/** The full bwrap command line for one run: namespaces, mounts, environment, rlimits, command. */
export function bwrapArgv(plan: BwrapPlan): string[] {
  const a: string[] = [plan.bwrap];
  a.push('--unshare-all', '--unshare-user');
  if (plan.features.disableUserns) a.push('--disable-userns');
  a.push('--die-with-parent', '--new-session', '--hostname', 'vtnode-box', '--cap-drop', 'ALL');
  for (const s of plan.system) {
    if (s.kind === 'symlink') a.push('--symlink', s.target, s.path);
    else a.push('--ro-bind', s.path, s.path);
  }
  a.push('--proc', '/proc', '--dev', '/dev');
  if (plan.features.tmpfsSize) a.push('--size', String(plan.tmpBytes));
  a.push('--tmpfs', '/tmp');
  for (const p of plan.readOnly) a.push('--ro-bind', p, p);
  a.push('--bind', plan.box, plan.box);
  // The sandbox's root is a tmpfs bwrap made: make it read-only so nothing can fill memory through it.
  a.push('--remount-ro', '/', '--chdir', plan.cwd, '--clearenv');
  for (const [k, v] of Object.entries(plan.env).sort(([x], [y]) => (x < y ? -1 : 1)))
    a.push('--setenv', k, v);
  a.push('--info-fd', '3', '--');
  const l = plan.limits;
  a.push(
    plan.prlimit,
    `--cpu=${l.cpuSeconds}`,
    `--data=${l.memoryBytes}`,
    `--nproc=${l.processes}`,
    `--fsize=${l.fileSizeBytes}`,
    '--core=0',
    '--',
    ...plan.argv,
  );
  return a;
}

/**
 * A box path bwrapSpawnArgv hands to bwrapArgv and then removes with its writable bind: a spawned
 * service gets no writable path but the private /tmp. Deriving from bwrapArgv (rather than a second
 * copy of it) keeps every namespace, mount and limit change made there in spawned services too.
 */
const NO_BOX = '/nonexistent/vtnode-no-box';
const WRITABLE_BINDS = new Set(['--bind', '--bind-try', '--dev-bind', '--dev-bind-try']);

/** What bwrapSpawnArgv needs: a BwrapPlan without a box, with the limits of a long-lived process. */
export type BwrapSpawnPlan = Omit<BwrapPlan, 'box' | 'limits'> & { limits: ProcessLimits };

/**
 * The bwrap command line for a long-lived confined process: bwrapArgv's, with no writable bind at all.
 * Throws if bwrapArgv's output no longer has the one box bind this removes (so a change there is seen).
 */
export function bwrapSpawnArgv(plan: BwrapSpawnPlan): string[] {
  const argv = bwrapArgv({ ...plan, box: NO_BOX, limits: asRunLimits(plan.limits) });
  const at = argv.findIndex((x, i) => x === '--bind' && argv[i + 1] === NO_BOX && argv[i + 2] === NO_BOX);
  const out = at < 0 ? argv : [...argv.slice(0, at), ...argv.slice(at + 3)];
  const end = out.indexOf('--');
  if (at < 0 || out.includes(NO_BOX) || out.slice(0, end).some((x) => WRITABLE_BINDS.has(x)))
    throw new Error('bwrapSpawnArgv: bwrapArgv no longer binds the box exactly once: update bwrapSpawnArgv');
  return out;
}

async function which(name: string, dirs = ['/usr/bin', '/bin', '/usr/local/bin']): Promise<string | null> {
  for (const d of dirs) {
    const p = `${d}/${name}`;
    if (
      await lstat(p).then(
        () => true,
        () => false,
      )
    )
      return p;
  }
  return null;
}

/** Resolves SYSTEM_PATHS on this host. */
export async function systemPaths(paths = SYSTEM_PATHS): Promise<SystemPath[]> {
  const out: SystemPath[] = [];
  for (const path of paths) {
    const st = await lstat(path).catch(() => null);
    if (!st) continue;
    if (st.isSymbolicLink()) out.push({ path, kind: 'symlink', target: await readlink(path) });
    else out.push({ path, kind: 'bind' });
  }
  return out;
}

export interface BwrapOptions {
  /** First uid handed to runs when the scorer runs as root (each concurrent run gets its own). */
  uidBase?: number;
  /** Size of the host-wide uid range (the most concurrent runs on the host, all scorers together). */
  maxConcurrent?: number;
  /** Size of the private /tmp, bytes. */
  tmpBytes?: number;
}

/** Creates the Linux backend; throws BackendUnavailableError when bwrap or prlimit is missing. */
export async function createBwrapConfinement(options: BwrapOptions = {}): Promise<Confinement> {
  if (process.platform !== 'linux') throw new BackendUnavailableError('bubblewrap runs on Linux only');
  const bwrap = await which('bwrap');
  if (!bwrap)
    throw new BackendUnavailableError('bwrap not found: install bubblewrap (apt-get install bubblewrap)');
  const prlimit = await which('prlimit');
  if (!prlimit) throw new BackendUnavailableError('prlimit not found: install util-linux');
  const { stdout } = await execFileAsync(bwrap, ['--version'], { env: { PATH: '/usr/bin:/bin' } }).catch(
    (err: Error) => {
      throw new BackendUnavailableError(`bwrap --version failed: ${err.message}`);
    },
  );
  const features = bwrapFeatures(stdout);
  if (!features.disableUserns)
    log.warn(`bubblewrap ${features.version} lacks --disable-userns: nested user namespaces stay possible`);
  const system = await systemPaths();
  const isRoot = process.getuid?.() === 0;
  const pool: UidPool | null = isRoot
    ? createUidPool({
        base: options.uidBase ?? 61000,
        size: options.maxConcurrent ?? 256,
        start: 'random',
        inUse: async (uid) => (await listProcesses()).some((p) => p.uid === uid),
      })
    : null;
  const tmpBytes = options.tmpBytes ?? 16 * 1024 * 1024;

  const confinement: Confinement = {
    name: 'bwrap',
    describe: () => ({
      backend: 'bwrap',
      version: features.version,
      disableUserns: features.disableUserns,
      uid: isRoot ? 'dedicated' : 'caller',
      tmpBytes,
    }),
    async run(spec: RunSpec): Promise<RunResult> {
      const uid = await pool?.acquire();
      try {
        // The box belongs to the run's own uid; nothing else on the host is writable by it.
        if (uid !== undefined) await execFileAsync('chown', ['-R', '-P', `${uid}:${uid}`, spec.box]);
        const argv = bwrapArgv({
          bwrap,
          prlimit,
          features,
          system,
          readOnly: dedupePaths(spec.readOnlyPaths.filter((p) => p !== spec.box)),
          box: spec.box,
          cwd: spec.cwd,
          env: spec.env,
          limits: spec.limits,
          tmpBytes,
          argv: spec.argv,
        });
        let namespace: string | null = null;
        let childPid: number | null = null;
        // The run's processes: those in its pid namespace (known once bwrap reports its child), plus
        // bwrap itself. As root the run's uid narrows the scan first; a process of that uid outside the
        // namespace is not this run's (a stale foreign user of the uid), so it is never killed here.
        const members = async (child: ChildProcess): Promise<ProcInfo[] | null> => {
          if (childPid !== null) namespace ??= await pidNamespace(childPid);
          const candidates = uid !== undefined ? (await listProcesses()).filter((p) => p.uid === uid) : null;
          if (namespace === null) return candidates;
          const inNs = candidates
            ? (
                await Promise.all(
                  candidates.map(async (p) =>
                    p.pid === child.pid || (await pidNamespace(p.pid)) === namespace ? p : null,
                  ),
                )
              ).filter((p): p is ProcInfo => p !== null)
            : await processesInNamespace(namespace);
          return inNs;
        };
        log(`run ${argv.join(' ')}`);
        return await runGroup({
          argv,
          env: { PATH: '/usr/bin:/bin' },
          cwd: '/',
          uid,
          gid: uid,
          wallMs: spec.limits.wallMs,
          outputBytes: spec.limits.outputBytes,
          signal: spec.signal,
          infoFds: 1,
          onInfo: (_fd, text) => {
            const m = /"child-pid":\s*(\d+)/.exec(text);
            if (m) childPid = Number(m[1]);
          },
          members,
        });
      } finally {
        if (uid !== undefined) await pool?.release(uid);
      }
    },
    spawn: (spec: SpawnSpec) => spawnBwrap({ bwrap, prlimit, features, system, tmpBytes, pool }, spec),
    selfTest: (signal?: AbortSignal): Promise<SelfTestResult> => runSelfTest(confinement, signal),
  };
  return confinement;
}

/** What a spawn needs from its backend. */
interface BwrapBackend {
  bwrap: string;
  prlimit: string;
  features: BwrapFeatures;
  system: SystemPath[];
  tmpBytes: number;
  pool: UidPool | null;
}

/**
 * Starts a long-lived process under bwrap: its own uid for its whole life (as root), read-only binds,
 * a private /tmp and nothing writable; its processes are told apart by pid namespace (and uid).
 */
async function spawnBwrap(backend: BwrapBackend, spec: SpawnSpec): Promise<SpawnedProcess> {
  const argv = bwrapSpawnArgv({
    bwrap: backend.bwrap,
    prlimit: backend.prlimit,
    features: backend.features,
    system: backend.system,
    readOnly: dedupePaths(spec.readOnlyPaths),
    cwd: spec.cwd,
    env: spec.env,
    limits: spec.limits,
    tmpBytes: backend.tmpBytes,
    argv: spec.argv,
  });
  const uid = await backend.pool?.acquire();
  const release = async () => {
    if (uid !== undefined) await backend.pool?.release(uid);
  };
  let childPid: number | null = null;
  let namespace: string | null = null;
  const members = async (child: ChildProcess): Promise<ProcInfo[] | null> => {
    if (childPid !== null) namespace ??= await pidNamespace(childPid);
    const ofUid = uid !== undefined ? (await listProcesses()).filter((p) => p.uid === uid) : null;
    if (namespace === null) return ofUid;
    if (!ofUid) return processesInNamespace(namespace);
    const marks = await Promise.all(
      ofUid.map((p) => (p.pid === child.pid ? namespace : pidNamespace(p.pid))),
    );
    return ofUid.filter((_, i) => marks[i] === namespace);
  };
  log(`spawn ${argv.join(' ')}`);
  // spawnGroup returns the uid itself when the process cannot start, and once it has exited.
  return spawnGroup({
    argv,
    env: { PATH: '/usr/bin:/bin' },
    cwd: '/',
    uid,
    gid: uid,
    signal: spec.signal,
    infoFds: 1,
    onInfo: (_fd, text) => {
      const m = /"child-pid":\s*(\d+)/.exec(text);
      if (m) childPid = Number(m[1]);
    },
    members,
    tree: processTree,
    onExit: release,
  });
}
