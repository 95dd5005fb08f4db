import { type ChildProcess, execFile } from 'node:child_process';
import { lstat, mkdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chownTree } from './box.ts';
import { watchBoxStorage } from './box-storage.ts';
import { type CgroupOptions, type Cgroups, probeCgroups, type RunCgroup } from './cgroup.ts';
import {
  BackendUnavailableError,
  type Confinement,
  REPORT_FD,
  type RunResult,
  type RunSpec,
  type SelfTestResult,
  type SpawnedProcess,
  type SpawnSpec,
} from './confinement.ts';
import { hostCpuWait } from './cpu-wait.ts';
import { hangRule, type RunMonitor, runGroup, sampledLimits } from './group-run.ts';
import { asRunLimits, type Limits, type ProcessLimits, rlimitCpuSeconds } from './limits.ts';
import { logger } from './log.ts';
import {
  listProcesses,
  type ProcInfo,
  pidNamespace,
  processesInNamespace,
  processTree,
  readProc,
} from './procfs.ts';
import {
  bindSources,
  STAGE_ERROR_PREFIX,
  type StageTools,
  type Staging,
  stagedArgv,
  stagingFor,
} from './reach.ts';
import { runSelfTest } from './self-test.ts';
import { spawnGroup } from './spawn-group.ts';
import { createUidPool, DEFAULT_UID_BASE, type UidPool } from './uid-pool.ts';

const log = logger('vtnode:sandbox:bwrap');
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
  /** Where a read-only path is bound from when not from itself: its stage (reach.ts), keyed by path. */
  sources?: Record<string, string>;
  box: string;
  /** Files inside the box bound read-only over themselves (judged tests, the harness entry). */
  protect: string[];
  cwd: string;
  env: Record<string, string>;
  limits: Limits;
  /**
   * A cgroup bounds the run's processes exactly: RLIMIT_NPROC then sits above it as a second wall, so the
   * cgroup's refusal is the one that fires (a fork the rlimit refuses leaves no trace to report).
   */
  cgroupProcesses?: boolean;
  /** Folders of the box bound at /tmp and /dev/shm (see scratchFolders). */
  scratch: ScratchFolders;
  argv: string[];
}

/** Folders of a box that the sandbox sees at /tmp and /dev/shm. */
export interface ScratchFolders {
  tmp: string;
  shm: string;
}

/** Parses `bubblewrap 0.8.0` into features. */
export function bwrapFeatures(versionText: string): BwrapFeatures & { version: string } {
  const m = /(\d+)\.(\d+)\.(\d+)/.exec(versionText);
  if (!m)
    throw new BackendUnavailableError(`cannot read the bubblewrap version from "${versionText.trim()}"`);
  const [maj, min] = [Number(m[1]), Number(m[2])];
  return { version: m[0], disableUserns: maj > 0 || min >= 8 };
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
  // /tmp and /dev/shm are folders of the box, so every writable place shares the box's quota of bytes
  // AND inodes (a bwrap tmpfs can cap bytes only: empty files would still cost kernel memory).
  a.push('--proc', '/proc', '--dev', '/dev', '--bind', plan.scratch.shm, '/dev/shm');
  a.push('--bind', plan.scratch.tmp, '/tmp');
  for (const p of plan.readOnly) a.push('--ro-bind', plan.sources?.[p] ?? p, p);
  a.push('--bind', plan.box, plan.box);
  // Read-only over themselves: the run cannot write them, rename over them or remove them (EBUSY).
  for (const p of plan.protect) a.push('--ro-bind', p, p);
  // The sandbox's root and /dev are tmpfs bwrap made, sized at half the host's RAM: both read-only.
  a.push('--remount-ro', '/dev', '--remount-ro', '/', '--chdir', plan.cwd, '--clearenv');
  for (const [k, v] of Object.entries(plan.env).sort(([x], [y]) => (x < y ? -1 : 1)))
    a.push('--setenv', k, v);
  a.push('--info-fd', '3', '--');
  const l = plan.limits;
  a.push(
    plan.prlimit,
    `--cpu=${rlimitCpuSeconds(l)}`,
    `--data=${l.memoryBytes}`,
    `--nproc=${plan.cgroupProcesses ? 2 * l.processes : l.processes}`,
    `--fsize=${l.fileSizeBytes}`,
    '--core=0',
    '--',
    ...plan.argv,
  );
  return a;
}

/**
 * Placeholder paths bwrapSpawnArgv hands to bwrapArgv and then takes out with their writable binds: a
 * spawned service gets no writable path but a small private /tmp. Deriving from bwrapArgv (rather than
 * a second copy of it) keeps every namespace, mount and limit change made there in spawned services too.
 */
const NO_BOX = '/nonexistent/vtnode-no-box';
const NO_TMP = '/nonexistent/vtnode-no-tmp';
const NO_SHM = '/nonexistent/vtnode-no-shm';
const WRITABLE_BINDS = new Set(['--bind', '--bind-try', '--dev-bind', '--dev-bind-try']);
/** Size of a spawned service's private /tmp (bubblewrap 0.8+ sizes it; older ones mount it unsized). */
const SPAWN_TMP_BYTES = 16 * 1024 * 1024;

/** What bwrapSpawnArgv needs: a BwrapPlan without a box or scratch folders, with a long-lived process's limits. */
export type BwrapSpawnPlan = Omit<BwrapPlan, 'box' | 'limits' | 'scratch' | 'protect'> & {
  limits: ProcessLimits;
};

/**
 * The bwrap command line for a long-lived confined process: bwrapArgv's, with no writable bind at all;
 * /tmp is a small private tmpfs and /dev/shm stays the read-only folder of bwrap's /dev. Throws if
 * bwrapArgv's output no longer has exactly the binds this takes out (so a change there is seen).
 */
export function bwrapSpawnArgv(plan: BwrapSpawnPlan): string[] {
  const argv = bwrapArgv({
    ...plan,
    box: NO_BOX,
    protect: [],
    scratch: { tmp: NO_TMP, shm: NO_SHM },
    limits: asRunLimits(plan.limits),
  });
  const tmpfs = [
    ...(plan.features.disableUserns ? ['--size', String(SPAWN_TMP_BYTES)] : []),
    '--tmpfs',
    '/tmp',
  ];
  const out: string[] = [];
  let taken = 0;
  for (let i = 0; i < argv.length; i++) {
    const [flag, from, to] = [argv[i], argv[i + 1], argv[i + 2]];
    if (flag === '--bind' && (from === NO_BOX || from === NO_SHM || from === NO_TMP)) {
      if (from === NO_TMP && to === '/tmp') out.push(...tmpfs);
      taken++;
      i += 2;
    } else out.push(argv[i]!);
  }
  const end = out.indexOf('--');
  if (
    taken !== 3 ||
    out.some((x) => x === NO_BOX || x === NO_TMP || x === NO_SHM) ||
    out.slice(0, end).some((x) => WRITABLE_BINDS.has(x))
  )
    throw new Error(
      'bwrapSpawnArgv: bwrapArgv no longer binds the box and its scratch folders: update bwrapSpawnArgv',
    );
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
  /** How runs are accounted per run (cgroup v2, v1 or none; default: probed). */
  cgroups?: CgroupOptions;
  /**
   * Reads each run's CPU wait instead of its cgroup's `cpu.pressure` and the host's (a monitor per run
   * with `cpuWait`; tests simulate a starved host with it). Default: the cgroup's, else the host's.
   */
  cpuWait?: () => RunMonitor;
}

/**
 * Creates (or reuses, when a box runs twice) the box's folders for /tmp and /dev/shm. A name planted
 * as a symlink in the workspace is refused: bwrap must bind a folder of the box, nothing else.
 */
export async function scratchFolders(box: string): Promise<ScratchFolders> {
  const root = join(box, '.vtnode-sandbox');
  const folders = { tmp: join(root, 'tmp'), shm: join(root, 'shm') };
  for (const dir of [root, folders.tmp, folders.shm]) {
    await mkdir(dir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    const st = await lstat(dir);
    if (!st.isDirectory()) throw new Error(`${dir} is not a folder of the box`);
  }
  return folders;
}

/** The run's monitors: its box's storage, and its cgroup or (without one) the sampled fallback. */
async function monitorsFor(
  spec: RunSpec,
  cgroups: Cgroups,
  cpuWait: (() => RunMonitor) | undefined,
): Promise<{ monitors: RunMonitor[]; cgroup: RunCgroup | null; done(): Promise<void> }> {
  const storage = await watchBoxStorage(spec.box, spec.limits);
  const cg = await cgroups.create(spec.limits);
  // The CPU wait is read from the first monitor that can tell: the run's cgroup, else the host.
  const wait = cpuWait ? [cpuWait()] : [];
  return {
    monitors: [
      ...wait,
      storage,
      cg ?? sampledLimits(spec.limits),
      ...(spec.reference ? [hostCpuWait()] : []),
    ],
    cgroup: cg,
    done: async () => await cg?.destroy(),
  };
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
  const stageTools = isRoot ? await findStageTools() : null;
  const pool: UidPool | null = isRoot
    ? createUidPool({
        base: options.uidBase ?? DEFAULT_UID_BASE,
        size: options.maxConcurrent ?? 256,
        start: 'random',
        inUse: async (uid) => (await listProcesses()).some((p) => p.uid === uid),
      })
    : null;
  const cgroups = await probeCgroups(options.cgroups);
  // As root per-run cgroups are expected; running without them is a weaker sandbox an operator must see.
  if (cgroups.kind === 'none')
    (isRoot ? log.warn : log)(`no per-run cgroups (${cgroups.detail}): rlimits and sampling only`);

  const confinement: Confinement = {
    name: 'bwrap',
    describe: () => ({
      backend: 'bwrap',
      version: features.version,
      disableUserns: features.disableUserns,
      uid: isRoot ? 'dedicated' : 'caller',
      scratch: 'box',
      runAccounting: cgroups.kind === 'none' ? 'sampled' : 'cgroup',
    }),
    async run(spec: RunSpec): Promise<RunResult> {
      const uid = await pool?.acquire();
      try {
        const scratch = await scratchFolders(spec.box);
        // The box belongs to the run's own uid; nothing else on the host is writable by it.
        if (uid !== undefined) await chownTree(spec.box, uid);
        const readOnly = dedupePaths(spec.readOnlyPaths.filter((p) => p !== spec.box));
        const staging = await stagingOf(readOnly, uid, stageTools);
        const argv = bwrapArgv({
          bwrap,
          prlimit,
          features,
          system,
          readOnly,
          sources: bindSources(staging),
          box: spec.box,
          protect: spec.protectedPaths ?? [],
          cwd: spec.cwd,
          env: spec.env,
          limits: spec.limits,
          cgroupProcesses: cgroups.kind !== 'none',
          scratch,
          argv: spec.argv,
        });
        log(`run ${argv.join(' ')}`);
        const watch = await monitorsFor(spec, cgroups, options.cpuWait);
        const tracked = watch.cgroup ? cgroupMembers(watch.cgroup) : namespaceMembers(uid);
        try {
          const result = await runGroup({
            ...launch(argv, uid, staging, stageTools),
            env: { PATH: '/usr/bin:/bin' },
            cwd: '/',
            wallMs: spec.limits.wallMs,
            hang: hangRule(spec),
            cpuMs: spec.limits.cpuMs,
            outputBytes: spec.limits.outputBytes,
            signal: spec.signal,
            infoFds: 1,
            onInfo: tracked.onInfo,
            members: tracked.members,
            monitors: watch.monitors,
            report: spec.reportPipe ? { fd: REPORT_FD, maxBytes: spec.reportPipe.maxBytes } : undefined,
          });
          return { ...result, setupFailed: setupFailure(result) };
        } finally {
          await watch.done();
        }
      } finally {
        if (uid !== undefined) await pool?.release(uid);
      }
    },
    spawn: (spec: SpawnSpec) => spawnBwrap({ bwrap, prlimit, features, system, pool, stageTools }, spec),
    selfTest: (signal?: AbortSignal): Promise<SelfTestResult> => runSelfTest(confinement, signal),
  };
  return confinement;
}

/** The util-linux programs that stage paths the run's uid cannot reach (reach.ts); null when one is missing. */
export async function findStageTools(): Promise<StageTools | null> {
  const [unshare, setpriv] = [await which('unshare'), await which('setpriv')];
  return unshare && setpriv ? { unshare, setpriv } : null;
}

/**
 * The staging a run of `uid` needs for its read-only paths (reach.ts), null when none (or not root).
 * Throws, never starting the run, when a path cannot be reached at all: an infrastructure failure.
 */
async function stagingOf(
  readOnly: string[],
  uid: number | undefined,
  tools: StageTools | null,
): Promise<Staging | null> {
  if (uid === undefined) return null;
  const staging = await stagingFor(readOnly, uid);
  if (staging && !tools)
    throw new Error(
      `the sandbox's uid ${uid} cannot reach ${staging.staged[0]!.path} (a folder above it is closed) and ` +
        'unshare or setpriv (util-linux) is missing to stage it: install util-linux, or keep the workspace ' +
        'under folders others can search',
    );
  return staging;
}

/**
 * How the run's command starts: as its uid directly, or (staged) as root in a mount namespace of its
 * own that binds the stage and then drops to the uid (reach.ts stagedArgv). The uid owns the report pipe
 * either way.
 */
function launch(
  argv: string[],
  uid: number | undefined,
  staging: Staging | null,
  tools: StageTools | null,
): { argv: string[]; uid: number | undefined; gid: number | undefined; switchesUser: boolean } {
  if (!staging || uid === undefined || !tools) return { argv, uid, gid: uid, switchesUser: false };
  return { argv: stagedArgv(argv, staging, uid, tools), uid, gid: uid, switchesUser: true };
}

/** How the programs that set a run up start their own error lines (bwrap, and staging's: reach.ts). */
const SETUP_ERROR_PREFIXES = ['bwrap: ', `${STAGE_ERROR_PREFIX} `, 'unshare: ', 'setpriv: '];

/**
 * Why the sandbox never started the command, or null: bwrap (or a staging step: unshare, the bind,
 * setpriv) failed while setting the run up, so it exited 1 with its own error as the first line of
 * stderr and nothing came through the report pipe. The command could print the same line and exit 1,
 * but that only turns its own run into an infrastructure failure (placed again, never a reward), so
 * the reading is safe in the direction that matters: a failure of the host is never scored as the
 * candidate's.
 */
export function setupFailure(result: Pick<RunResult, 'exitCode' | 'stderr' | 'report'>): string | null {
  if (result.exitCode !== 1 || (result.report && result.report.text !== '')) return null;
  const first = result.stderr.split('\n', 1)[0]!.trim();
  return SETUP_ERROR_PREFIXES.some((p) => first.startsWith(p)) ? first : null;
}

/** What runGroup needs to know a run's processes (RunGroupOptions' onInfo and members). */
interface Members {
  onInfo: (fd: number, text: string) => void;
  members: (child: ChildProcess) => Promise<ProcInfo[] | null>;
}

/**
 * The processes of a run with a cgroup of its own: those in it. The gate attached bwrap before it ran
 * anything, so every process of the run is there, and none can leave (the hierarchy is not the run's to
 * write). One file read per sample, where a scan reads two files of every process on the host.
 */
function cgroupMembers(cg: RunCgroup): Members {
  return {
    onInfo: () => {},
    async members() {
      const infos = await Promise.all((await cg.procs()).map(readProc));
      return infos.filter((p): p is ProcInfo => p !== null);
    },
  };
}

/**
 * The processes of a bwrap service, or of a run without a cgroup: those in its pid namespace (known
 * once bwrap reports its child on the info fd), plus bwrap itself, found by scanning every process. As
 * root the run's uid narrows the scan first; a process of that uid outside the namespace is not this
 * run's (a stale foreign user of the uid), so it is never counted or killed.
 */
function namespaceMembers(uid: number | undefined): Members {
  let childPid: number | null = null;
  let namespace: string | null = null;
  return {
    onInfo: (_fd, text) => {
      const m = /"child-pid":\s*(\d+)/.exec(text);
      if (m) childPid = Number(m[1]);
    },
    async members(child) {
      if (childPid !== null) namespace ??= await pidNamespace(childPid);
      const ofUid = uid !== undefined ? (await listProcesses()).filter((p) => p.uid === uid) : null;
      if (namespace === null) return ofUid;
      if (!ofUid) return processesInNamespace(namespace);
      const marks = await Promise.all(
        ofUid.map((p) => (p.pid === child.pid ? namespace : pidNamespace(p.pid))),
      );
      return ofUid.filter((_, i) => marks[i] === namespace);
    },
  };
}

/** What a spawn needs from its backend. */
interface BwrapBackend {
  bwrap: string;
  prlimit: string;
  features: BwrapFeatures;
  system: SystemPath[];
  pool: UidPool | null;
  stageTools: StageTools | null;
}

/**
 * Starts a long-lived process under bwrap: its own uid for its whole life (as root), read-only binds,
 * a private /tmp and nothing writable; its processes are told apart by pid namespace (and uid).
 */
async function spawnBwrap(backend: BwrapBackend, spec: SpawnSpec): Promise<SpawnedProcess> {
  const readOnly = dedupePaths(spec.readOnlyPaths);
  const plan = {
    bwrap: backend.bwrap,
    prlimit: backend.prlimit,
    features: backend.features,
    system: backend.system,
    cwd: spec.cwd,
    env: spec.env,
    limits: spec.limits,
    argv: spec.argv,
  };
  const uid = await backend.pool?.acquire();
  const release = async () => {
    if (uid !== undefined) await backend.pool?.release(uid);
  };
  let staging: Staging | null;
  try {
    staging = await stagingOf(readOnly, uid, backend.stageTools);
  } catch (err) {
    await release();
    throw err;
  }
  const argv = bwrapSpawnArgv({ ...plan, readOnly, sources: bindSources(staging) });
  const tracked = namespaceMembers(uid);
  log(`spawn ${argv.join(' ')}`);
  // spawnGroup returns the uid itself when the process cannot start, and once it has exited.
  return spawnGroup({
    ...launch(argv, uid, staging, backend.stageTools),
    env: { PATH: '/usr/bin:/bin' },
    cwd: '/',
    signal: spec.signal,
    infoFds: 1,
    onInfo: tracked.onInfo,
    members: tracked.members,
    tree: processTree,
    onExit: release,
  });
}
