import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { readPressureSome } from './cpu-wait.ts';
import { logger } from './log.ts';
import type { CpuWait } from './overrun.ts';
import { pidAlive } from './pid.ts';
import { type MountEntry, readMounts } from './procfs.ts';

const log = logger('vtnode:sandbox:cgroup');

/** Which cgroup interface accounts for runs: v2 (unified), v1 (one hierarchy per controller) or none. */
export type CgroupKind = 'v2' | 'v1' | 'none';

/** What a run's cgroup enforces. */
export interface CgroupLimits {
  /** Memory of every process of the run together, bytes; no swap. */
  memoryBytes: number;
  /** Processes and threads of the run together. */
  processes: number;
}

/** A limit the kernel enforced on the run's cgroup. */
export type CgroupExceeded = 'memory' | 'processes';

/** The cgroup of one run: every process the run ever starts lives and is accounted in it. */
export interface RunCgroup {
  /** Its folders (one per hierarchy on v1). */
  readonly dirs: string[];
  /** Moves a process (the run's leader, held at its gate before it runs anything) into the cgroup. */
  attach(pid: number): Promise<void>;
  /**
   * The processes in the cgroup now (every descendant of an attached process: none can leave it without
   * write access to the hierarchy). Read from one file, so cheap enough to poll.
   */
  procs(): Promise<number[]>;
  /** CPU time of every process that ever ran in the cgroup, dead ones included, milliseconds. */
  cpuMs(): Promise<number>;
  /** `memory` after an OOM kill in the cgroup, `processes` after a fork refused by its pids limit. */
  exceeded(): Promise<CgroupExceeded | null>;
  /**
   * Time some process of the run waited for a CPU (cgroup v2 `cpu.pressure` "some", dead processes
   * included), or null without a cgroup2 folder for the run (PSI off, or no cgroup2 hierarchy on v1).
   */
  cpuWait(): Promise<CpuWait | null>;
  /** Kills whatever is left in the cgroup and removes it (what cannot be removed is swept later). */
  destroy(): Promise<void>;
}

/** The host's cgroup support, probed once per backend. */
export interface Cgroups {
  readonly kind: CgroupKind;
  /** Where runs' cgroups are made, or why there are none. */
  readonly detail: string;
  /** A fresh cgroup for one run with `limits` applied; null when kind is `none`. */
  create(limits: CgroupLimits): Promise<RunCgroup | null>;
}

export interface CgroupOptions {
  /** `auto` (default) tries v2, then v1, then none; a kind restricts the probe to it (or none). */
  mode?: 'auto' | CgroupKind;
  /** cgroup v2 folder under which runs' cgroups are made (a delegated one); default: our own cgroup. */
  v2Parent?: string;
}

/** Parent folder of runs' cgroups per role: the same folder thrice on v2, one per hierarchy on v1. */
export interface CgroupLayout {
  kind: 'v1' | 'v2';
  memory: string;
  pids: string;
  cpu: string;
  /**
   * cgroup2 folder whose children give runs their CPU pressure: the v2 folder itself, or on a v1 host
   * that also mounts a cgroup2 hierarchy (hybrid), our folder there (no controller needed for PSI).
   */
  pressure?: string | undefined;
}

type Role = 'memory' | 'pids' | 'cpu';

/** One cgroup file the implementation reads or writes, by role. */
interface Knob {
  role: Role;
  file: string;
}

/** What differs between v1 and v2: file names and units. */
interface Flavor {
  /** Limit files written at creation; `optional` ones are skipped when the kernel lacks them. */
  limits(l: CgroupLimits): (Knob & { value: string; optional?: boolean })[];
  /** CPU usage: file, key (null: the whole file is the number) and the divisor to milliseconds. */
  cpu: Knob & { key: string | null; perMs: number };
  /** Count of OOM kills in the cgroup. */
  oomKills: Knob & { key: string };
  /** Count of forks refused by the pids limit. */
  forkFailures: Knob & { key: string };
}

const FLAVORS: Record<'v1' | 'v2', Flavor> = {
  v1: {
    limits: (l) => [
      { role: 'memory', file: 'memory.limit_in_bytes', value: String(l.memoryBytes) },
      // memsw is memory + swap: equal to the memory limit means no swap (absent without swap accounting).
      { role: 'memory', file: 'memory.memsw.limit_in_bytes', value: String(l.memoryBytes), optional: true },
      { role: 'pids', file: 'pids.max', value: String(l.processes) },
    ],
    cpu: { role: 'cpu', file: 'cpuacct.usage', key: null, perMs: 1e6 },
    oomKills: { role: 'memory', file: 'memory.oom_control', key: 'oom_kill' },
    forkFailures: { role: 'pids', file: 'pids.events', key: 'max' },
  },
  v2: {
    limits: (l) => [
      { role: 'memory', file: 'memory.max', value: String(l.memoryBytes) },
      { role: 'memory', file: 'memory.swap.max', value: '0', optional: true },
      // One OOM kill ends the whole run rather than leaving a runner with a dead worker.
      { role: 'memory', file: 'memory.oom.group', value: '1', optional: true },
      { role: 'pids', file: 'pids.max', value: String(l.processes) },
    ],
    cpu: { role: 'cpu', file: 'cpu.stat', key: 'usage_usec', perMs: 1e3 },
    oomKills: { role: 'memory', file: 'memory.events', key: 'oom_kill' },
    forkFailures: { role: 'pids', file: 'pids.events', key: 'max' },
  },
};

/** Parses `key value` lines (cpu.stat, memory.events, pids.events, memory.oom_control). */
export function parseKeyed(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [key, value] = line.trim().split(/\s+/);
    if (key && value !== undefined && /^\d+$/.test(value)) out.set(key, Number(value));
  }
  return out;
}

/** Parses /proc/<pid>/cgroup into controller → path ('' for the v2 line `0::/path`). */
export function parseProcCgroup(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[2] === '') out.set('', m[3]!);
    for (const c of m[2]!.split(',').filter(Boolean)) out.set(c, m[3]!);
  }
  return out;
}

/** The folder of cgroup `path` in the hierarchy mounted by `mount`, or null when it is not visible there. */
function folderOf(mount: MountEntry, path: string): string | null {
  const root = mount.root === '/' ? '' : mount.root;
  if (root !== '' && path !== root && !path.startsWith(`${root}/`)) return null;
  return resolve(mount.mountPoint, `.${path.slice(root.length)}`);
}

/**
 * Where this process's own cgroups are, per interface: the v2 folder (when a cgroup2 hierarchy is
 * mounted) and the v1 folders of the memory, pids and cpuacct hierarchies (when all three are).
 */
export function cgroupLayouts(
  mounts: MountEntry[],
  procCgroup: string,
): { v2: CgroupLayout | null; v1: CgroupLayout | null } {
  const own = parseProcCgroup(procCgroup);
  const v2Mount = mounts.find((m) => m.fsType === 'cgroup2');
  const v2Path = own.get('');
  const v2Dir = v2Mount && v2Path !== undefined ? folderOf(v2Mount, v2Path) : null;
  const v1Dir = (controller: string): string | null => {
    const mount = mounts.find((m) => m.fsType === 'cgroup' && m.superOptions.includes(controller));
    const path = own.get(controller);
    return mount && path !== undefined ? folderOf(mount, path) : null;
  };
  const [memory, pids, cpu] = [v1Dir('memory'), v1Dir('pids'), v1Dir('cpuacct')];
  return {
    v2: v2Dir ? { kind: 'v2', memory: v2Dir, pids: v2Dir, cpu: v2Dir, pressure: v2Dir } : null,
    v1: memory && pids && cpu ? { kind: 'v1', memory, pids, cpu, pressure: v2Dir ?? undefined } : null,
  };
}

const NAME = /^vtnode-(\d+)-[0-9a-f]+$/;

async function procsIn(dir: string): Promise<number[]> {
  const text = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean).map(Number);
}

/** Empties (SIGKILL, or cgroup.kill on v2) and removes cgroup folders; false when some remain after 3 s. */
async function removeCgroup(dirs: string[]): Promise<boolean> {
  const deadline = performance.now() + 3000;
  for (;;) {
    const left: string[] = [];
    for (const dir of dirs) {
      try {
        await rmdir(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') left.push(dir);
      }
    }
    if (left.length === 0) return true;
    if (performance.now() > deadline) return false;
    for (const dir of left) {
      // cgroup.kill (v2, Linux 5.14+) kills atomically, even a fork bomb racing the loop below.
      const killed = await writeFile(join(dir, 'cgroup.kill'), '1').then(
        () => true,
        () => false,
      );
      if (killed) continue;
      for (const pid of await procsIn(dir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
    await sleep(20);
  }
}

/** Reads one number from a cgroup file (the whole file, or the value of `key`); 0 when absent. */
async function readNumber(dir: string, file: string, key: string | null): Promise<number> {
  const text = await readFile(join(dir, file), 'utf8').catch(() => null);
  if (text === null) return 0;
  return key === null ? Number(text.trim()) || 0 : (parseKeyed(text).get(key) ?? 0);
}

function runCgroup(layout: CgroupLayout, name: string): RunCgroup & { init(l: CgroupLimits): Promise<void> } {
  const flavor = FLAVORS[layout.kind];
  const dirOf = (role: Role) => join(layout[role], name);
  const dirs = [...new Set((['memory', 'pids', 'cpu'] as const).map(dirOf))];
  // The pressure folder is optional on v1: a cgroup2 hierarchy we cannot write costs only the reading.
  let pressure = layout.pressure ? join(layout.pressure, name) : null;
  return {
    dirs,
    async init(limits) {
      for (const dir of dirs) await mkdir(dir);
      if (pressure && !dirs.includes(pressure)) {
        const made = await mkdir(pressure).then(
          () => true,
          (err: Error) => {
            log(`no cgroup2 folder for CPU pressure: ${err.message}`);
            return false;
          },
        );
        if (made) dirs.push(pressure);
        else pressure = null;
      }
      for (const knob of flavor.limits(limits)) {
        await writeFile(join(dirOf(knob.role), knob.file), knob.value).catch((err: NodeJS.ErrnoException) => {
          if (!(knob.optional && err.code === 'ENOENT')) throw err;
        });
      }
    },
    async attach(pid) {
      for (const dir of dirs) await writeFile(join(dir, 'cgroup.procs'), String(pid));
    },
    async procs() {
      // Unlike procsIn (cleanup), a read that fails throws: the caller must not take it for "none left".
      const text = await readFile(join(dirOf('pids'), 'cgroup.procs'), 'utf8');
      return text.split('\n').filter(Boolean).map(Number);
    },
    async cpuMs() {
      const { role, file, key, perMs } = flavor.cpu;
      return (await readNumber(dirOf(role), file, key)) / perMs;
    },
    async exceeded() {
      const oom = flavor.oomKills;
      if ((await readNumber(dirOf(oom.role), oom.file, oom.key)) > 0) return 'memory';
      const forks = flavor.forkFailures;
      if ((await readNumber(dirOf(forks.role), forks.file, forks.key)) > 0) return 'processes';
      return null;
    },
    async cpuWait() {
      const us = pressure ? await readPressureSome(join(pressure, 'cpu.pressure')) : null;
      return us === null ? null : { ms: us / 1000, source: 'cgroup-psi' };
    },
    async destroy() {
      if (!(await removeCgroup(dirs)))
        log.warn(`cgroup ${dirs.join(', ')} could not be emptied and removed; the next backend sweeps it`);
    },
  };
}

/** Removes run cgroups whose scorer is gone (killed before its cleanup ran). */
async function sweepStaleCgroups(layout: CgroupLayout): Promise<void> {
  for (const parent of new Set([layout.memory, layout.pids, layout.cpu, layout.pressure ?? layout.cpu])) {
    for (const name of await readdir(parent).catch(() => [] as string[])) {
      const m = NAME.exec(name);
      if (m && !pidAlive(Number(m[1]))) await removeCgroup([join(parent, name)]);
    }
  }
}

/**
 * Makes memory and pids available to children of a v2 cgroup. cgroup v2 enables controllers for
 * children only in a cgroup without processes of its own ("no internal processes"); when the scorer is
 * alone in its cgroup (a service with `Delegate=yes`), it moves itself into a leaf child, as systemd
 * recommends for delegated subtrees, and enables them.
 */
async function delegateV2(parent: string): Promise<void> {
  const words = async (file: string) =>
    (await readFile(join(parent, file), 'utf8').catch(() => '')).split(/\s+/).filter(Boolean);
  const enabled = await words('cgroup.subtree_control');
  const wanted = ['memory', 'pids'].filter((c) => !enabled.includes(c));
  if (wanted.length === 0) return;
  const available = await words('cgroup.controllers');
  const absent = wanted.filter((c) => !available.includes(c));
  if (absent.length > 0) throw new Error(`controller(s) ${absent.join(', ')} not available in ${parent}`);
  const enable = () =>
    writeFile(join(parent, 'cgroup.subtree_control'), wanted.map((c) => `+${c}`).join(' '));
  try {
    await enable();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EBUSY') throw err;
    const procs = await procsIn(parent);
    if (procs.length !== 1 || procs[0] !== process.pid)
      throw new Error(`${parent} holds other processes: delegate a cgroup to the scorer (v2Parent)`);
    const leaf = join(parent, 'vtnode-scorer');
    await mkdir(leaf).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e;
    });
    await writeFile(join(leaf, 'cgroup.procs'), String(process.pid));
    await enable();
  }
}

/** Cgroups that create run cgroups under `layout` (no probing: see probeCgroups). */
export function layoutCgroups(layout: CgroupLayout): Cgroups {
  return {
    kind: layout.kind,
    detail: `runs under ${[...new Set([layout.memory, layout.pids, layout.cpu])].join(', ')}`,
    async create(limits) {
      const cg = runCgroup(layout, `vtnode-${process.pid}-${randomBytes(6).toString('hex')}`);
      try {
        await cg.init(limits);
      } catch (err) {
        await cg.destroy();
        throw err;
      }
      return cg;
    },
  };
}

/** No cgroups: runs are bounded by per-process rlimits and sampling only. */
export function noCgroups(detail: string): Cgroups {
  return { kind: 'none', detail, create: async () => null };
}

/** Creates and removes one cgroup under `layout`: the layout is usable only if that works. */
async function tryLayout(layout: CgroupLayout): Promise<Cgroups> {
  await sweepStaleCgroups(layout);
  const cgroups = layoutCgroups(layout);
  const probe = await cgroups.create({ memoryBytes: 1024 ** 3, processes: 64 });
  await probe?.destroy();
  return cgroups;
}

/**
 * Finds how runs can be accounted per run on this host: cgroup v2 under our own (or the given,
 * delegated) cgroup with memory and pids enabled for children, else cgroup v1 with the memory, pids and
 * cpuacct hierarchies under our own cgroups, else none (the reason is in `detail`). Stale run cgroups
 * of dead scorers are removed on the way.
 */
export async function probeCgroups(options: CgroupOptions = {}): Promise<Cgroups> {
  const mode = options.mode ?? 'auto';
  if (mode === 'none') return noCgroups('disabled');
  if (process.platform !== 'linux') return noCgroups(`no cgroups on ${process.platform}`);
  const [mounts, own] = await Promise.all([readMounts(), readFile('/proc/self/cgroup', 'utf8')]);
  const layouts = cgroupLayouts(mounts, own);
  const reasons: string[] = [];
  if (mode === 'auto' || mode === 'v2') {
    const parent = options.v2Parent ?? layouts.v2?.memory;
    if (!parent) reasons.push('v2: no cgroup2 hierarchy');
    else {
      try {
        await delegateV2(parent);
        return await tryLayout({ kind: 'v2', memory: parent, pids: parent, cpu: parent });
      } catch (err) {
        reasons.push(`v2: ${(err as Error).message}`);
      }
    }
  }
  if (mode === 'auto' || mode === 'v1') {
    if (!layouts.v1) reasons.push('v1: memory, pids and cpuacct hierarchies not all mounted');
    else {
      try {
        return await tryLayout(layouts.v1);
      } catch (err) {
        reasons.push(`v1: ${(err as Error).message}`);
      }
    }
  }
  log(`no usable cgroups: ${reasons.join('; ')}`);
  return noCgroups(reasons.join('; '));
}
