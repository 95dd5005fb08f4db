import { execFile } from 'node:child_process';
import { access } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chownTree } from './box.ts';
import { watchBoxStorage } from './box-storage.ts';
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
import { CLOCK_TICKS, PAGE_SIZE, type ProcInfo } from './procfs.ts';
import { runSelfTest } from './self-test.ts';
import { spawnGroup } from './spawn-group.ts';
import { createUidPool, DEFAULT_UID_BASE, type UidPool } from './uid-pool.ts';

const execFileAsync = promisify(execFile);

export const SANDBOX_EXEC = '/usr/bin/sandbox-exec';

/** System locations every process needs to start on macOS (dyld cache, frameworks, libraries). */
export const SEATBELT_SYSTEM_READS = [
  '/usr/lib',
  '/usr/bin',
  '/bin',
  '/usr/share',
  '/System',
  '/Library/Apple',
  '/Library/Preferences/Logging',
  '/private/var/db/dyld',
  '/private/var/db/timezone',
  '/private/etc/localtime',
  '/opt/homebrew',
  '/usr/local',
];

/**
 * The Seatbelt profile for `readCount` read-only parameters. It never contains a path: the box, the
 * read-only paths and the package cache are `(param ...)` references filled with `-D` on the command
 * line. Deny by default; no network rule at all (so every socket is denied); writes only in the box
 * and the standard /dev nodes.
 */
export function seatbeltProfile(readCount: number, protectCount = 0): string {
  const reads = Array.from({ length: readCount }, (_, i) => `  (subpath (param "READ_${i}"))`);
  return [
    '(version 1)',
    '(deny default)',
    '(allow process-fork)',
    '(allow process-exec (subpath (param "BOX")) (subpath "/usr/bin") (subpath "/bin")',
    ...Array.from({ length: readCount }, (_, i) => `  (subpath (param "READ_${i}"))`),
    ')',
    '(allow signal (target same-sandbox))',
    '(allow sysctl-read)',
    '(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))',
    '(allow ipc-posix-shm-read-data ipc-posix-shm-read-metadata (ipc-posix-name "apple.shm.notification_center"))',
    '(allow file-read-metadata)',
    '(allow file-read*',
    ...SEATBELT_SYSTEM_READS.map((p) => `  (subpath "${p}")`),
    '  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/random") (literal "/dev/urandom")',
    '  (literal "/dev/tty") (regex #"^/dev/fd/")',
    '  (subpath (param "BOX"))',
    '  (subpath (param "NPM_CACHE"))',
    ...reads,
    ')',
    '(allow file-write*',
    '  (subpath (param "BOX"))',
    '  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (regex #"^/dev/fd/")',
    ')',
    // Later rules take precedence: the judged test files and the harness stay read-only in the box.
    ...(protectCount > 0
      ? [
          '(deny file-write*',
          ...Array.from({ length: protectCount }, (_, i) => `  (literal (param "PROTECT_${i}"))`),
          ')',
        ]
      : []),
    '',
  ].join('\n');
}

/** Everything the sandbox-exec argv depends on (pure, snapshot-tested). */
export interface SeatbeltPlan {
  box: string;
  readOnly: string[];
  /** Files inside the box that stay read-only (judged tests, the harness entry). */
  protect?: string[];
  /** The package cache (`~/.npm`); never a credential file such as `~/.npmrc`. */
  npmCache: string;
  limits: Limits;
  argv: string[];
}

/**
 * `sandbox-exec -p <profile> -D BOX=… -D READ_i=… -- /bin/sh -c 'ulimit …; exec "$@"' sh <argv>`:
 * rlimits are applied by the shell with values passed as arguments, never spliced into the script.
 */
export function seatbeltArgv(plan: SeatbeltPlan): string[] {
  const l = plan.limits;
  const params = ['-D', `BOX=${plan.box}`, '-D', `NPM_CACHE=${plan.npmCache}`];
  for (const [i, p] of plan.readOnly.entries()) params.push('-D', `READ_${i}=${p}`);
  const protect = plan.protect ?? [];
  for (const [i, p] of protect.entries()) params.push('-D', `PROTECT_${i}=${p}`);
  return [
    SANDBOX_EXEC,
    '-p',
    seatbeltProfile(plan.readOnly.length, protect.length),
    ...params,
    '/bin/sh',
    '-c',
    'ulimit -t "$1" -d "$2" -u "$3" -f "$4" -c 0 || exit 125; shift 4; exec "$@"',
    'sh',
    String(rlimitCpuSeconds(l)),
    String(Math.floor(l.memoryBytes / 1024)),
    String(l.processes),
    String(Math.floor(l.fileSizeBytes / 512)),
    ...plan.argv,
  ];
}

/**
 * The box path of a spawned (long-lived) process: a path that cannot exist, under the root-owned,
 * read-only /private/var/empty, so the profile's box rules (write, exec) grant nothing. Deriving from
 * seatbeltArgv keeps every rule of the run profile in spawned services too.
 */
export const SEATBELT_NO_BOX = '/private/var/empty/vtnode-no-box';

/** What seatbeltSpawnArgv needs: a SeatbeltPlan without a box, with the limits of a long-lived process. */
export type SeatbeltSpawnPlan = Omit<SeatbeltPlan, 'box' | 'limits'> & { limits: ProcessLimits };

/** The sandbox-exec command line for a long-lived process: nothing writable but /dev/null and the like. */
export function seatbeltSpawnArgv(plan: SeatbeltSpawnPlan): string[] {
  return seatbeltArgv({ ...plan, box: SEATBELT_NO_BOX, limits: asRunLimits(plan.limits) });
}

/**
 * Parses `ps -A -o pid=,ppid=,pgid=,uid=,stat=,time=,rss=` (rss in KiB) into live processes with usage;
 * zombies are left out.
 */
export function parsePs(text: string): ProcInfo[] {
  return text
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 7 && /^\d+$/.test(f[0]!) && !f[4]!.startsWith('Z'))
    .map(([pid, ppid, pgid, uid, , time, rss]) => ({
      pid: Number(pid),
      ppid: Number(ppid),
      pgid: Number(pgid),
      uid: Number(uid),
      cpuTicks: parsePsTime(time!),
      // This ps call shows neither threads nor reaped children's CPU: a process counts as one.
      reapedCpuTicks: 0,
      rssPages: Math.round((Number(rss) * 1024) / PAGE_SIZE),
      threads: 1,
    }));
}

async function psAll(): Promise<ProcInfo[]> {
  const { stdout } = await execFileAsync('/bin/ps', ['-A', '-o', 'pid=,ppid=,pgid=,uid=,stat=,time=,rss=']);
  return parsePs(stdout);
}

/** Parses a `ps -o time` value (`[[dd-]hh:]mm:ss[.ff]`) into clock ticks (CLOCK_TICKS per second). */
export function parsePsTime(text: string): number {
  const m = /^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$/.exec(text.trim());
  if (!m) return 0;
  const seconds = Number(m[1] ?? 0) * 86400 + Number(m[2] ?? 0) * 3600 + Number(m[3]) * 60 + Number(m[4]);
  return Math.round(seconds * CLOCK_TICKS);
}

/**
 * Live processes of a uid with their CPU time and resident memory, from `ps` (macOS has no procfs).
 * Threads are not listed by this `ps` call: each process counts as one.
 */
async function processesOfUid(uid: number): Promise<ProcInfo[]> {
  return (await psAll()).filter((p) => p.uid === uid);
}

export interface SeatbeltOptions {
  /** First uid handed to runs when the scorer runs as root. */
  uidBase?: number;
  /** Size of the host-wide uid range (the most concurrent runs on the host). */
  maxConcurrent?: number;
  /** Package cache made readable (default ~/.npm). */
  npmCache?: string;
}

/** Creates the macOS backend; throws BackendUnavailableError without sandbox-exec. */
export async function createSeatbeltConfinement(options: SeatbeltOptions = {}): Promise<Confinement> {
  if (process.platform !== 'darwin') throw new BackendUnavailableError('Seatbelt runs on macOS only');
  await access(SANDBOX_EXEC).catch(() => {
    throw new BackendUnavailableError(`${SANDBOX_EXEC} not found`);
  });
  const isRoot = process.getuid?.() === 0;
  const pool: UidPool | null = isRoot
    ? createUidPool({
        base: options.uidBase ?? DEFAULT_UID_BASE,
        size: options.maxConcurrent ?? 256,
        start: 'random',
        inUse: async (uid) => (await processesOfUid(uid)).length > 0,
      })
    : null;
  const npmCache = options.npmCache ?? join(homedir(), '.npm');
  const confinement: Confinement = {
    name: 'seatbelt',
    describe: () => ({ backend: 'seatbelt', uid: isRoot ? 'dedicated' : 'caller' }),
    async run(spec: RunSpec): Promise<RunResult> {
      const uid = await pool?.acquire();
      try {
        if (uid !== undefined) await chownTree(spec.box, uid);
        // No cgroups on macOS: the box is walked, memory and processes are sampled (with a dedicated uid).
        const monitors: RunMonitor[] = [await watchBoxStorage(spec.box, spec.limits)];
        if (uid !== undefined) monitors.push(sampledLimits(spec.limits));
        if (spec.reference) monitors.push(hostCpuWait());
        return await runGroup({
          argv: seatbeltArgv({
            box: spec.box,
            readOnly: spec.readOnlyPaths,
            protect: spec.protectedPaths ?? [],
            npmCache,
            limits: spec.limits,
            argv: spec.argv,
          }),
          env: spec.env,
          cwd: spec.cwd,
          uid,
          gid: uid,
          wallMs: spec.limits.wallMs,
          hang: hangRule(spec),
          cpuMs: spec.limits.cpuMs,
          outputBytes: spec.limits.outputBytes,
          signal: spec.signal,
          monitors,
          report: spec.reportPipe ? { fd: REPORT_FD, maxBytes: spec.reportPipe.maxBytes } : undefined,
          // With a dedicated uid every process of that uid belongs to the run: a setsid child that
          // left the group is still found and killed (macOS has no pid namespace).
          ...(uid !== undefined ? { members: () => processesOfUid(uid) } : {}),
        });
      } finally {
        if (uid !== undefined) await pool?.release(uid);
      }
    },
    async spawn(spec: SpawnSpec): Promise<SpawnedProcess> {
      const argv = seatbeltSpawnArgv({
        readOnly: spec.readOnlyPaths,
        npmCache,
        limits: spec.limits,
        argv: spec.argv,
      });
      const uid = await pool?.acquire();
      return spawnGroup({
        argv,
        env: spec.env,
        cwd: spec.cwd,
        uid,
        gid: uid,
        signal: spec.signal,
        // With a dedicated uid every process of it is the service's; otherwise its process group.
        members: async (child) =>
          (await psAll()).filter((p) => (uid !== undefined ? p.uid === uid : p.pgid === child.pid)),
        onExit: async () => {
          if (uid !== undefined) await pool?.release(uid);
        },
      });
    },
    selfTest: (signal?: AbortSignal): Promise<SelfTestResult> => runSelfTest(confinement, signal),
  };
  return confinement;
}
