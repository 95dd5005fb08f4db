import { readdir, readFile, readlink } from 'node:fs/promises';

/** One process as seen in /proc (Linux only). */
export interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
  /** Real uid. */
  uid: number;
  /** user + system CPU time, clock ticks. */
  cpuTicks: number;
  /** user + system CPU time of the children it has reaped (waited for), clock ticks. */
  reapedCpuTicks: number;
  /** Resident set, pages. */
  rssPages: number;
  /** Threads of the process (each counts against RLIMIT_NPROC and a cgroup's pids limit). */
  threads: number;
}

/** Clock ticks per second and page size: the values of every Linux build we run on. */
export const CLOCK_TICKS = 100;
export const PAGE_SIZE = 4096;

/** Parses /proc/<pid>/stat; the command name may contain spaces and parentheses. */
export function parseStat(text: string): {
  state: string;
  ppid: number;
  pgid: number;
  cpuTicks: number;
  reapedCpuTicks: number;
  rssPages: number;
  threads: number;
} {
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state): ppid=4, pgrp=5, utime=14, stime=15, cutime=16, cstime=17,
  // num_threads=20, rss=24.
  const field = (n: number) => Number(rest[n - 3]);
  return {
    state: rest[0] ?? '?',
    ppid: field(4),
    pgid: field(5),
    cpuTicks: field(14) + field(15),
    reapedCpuTicks: field(16) + field(17),
    rssPages: field(24),
    threads: field(20),
  };
}

/** One process by pid, or null when it is gone or a zombie. */
export async function readProc(pid: number): Promise<ProcInfo | null> {
  try {
    const [stat, status] = await Promise.all([
      readFile(`/proc/${pid}/stat`, 'utf8'),
      readFile(`/proc/${pid}/status`, 'utf8'),
    ]);
    const uidLine = /^Uid:\s+(\d+)/m.exec(status);
    const { state, ...rest } = parseStat(stat);
    // A zombie cannot run any more: it is dead, only not yet reaped by whoever inherited it.
    if (state === 'Z' || state === 'X') return null;
    return { pid, uid: uidLine ? Number(uidLine[1]) : -1, ...rest };
  } catch {
    return null; // exited meanwhile
  }
}

/** Every process on the host, with uid, group and usage. */
export async function listProcesses(): Promise<ProcInfo[]> {
  const pids = (await readdir('/proc')).filter((n) => /^\d+$/.test(n)).map(Number);
  const infos = await Promise.all(pids.map(readProc));
  return infos.filter((p): p is ProcInfo => p !== null);
}

/** The pid-namespace link of a process (`pid:[4026531836]`), or null when it is gone or unreadable. */
export async function pidNamespace(pid: number): Promise<string | null> {
  try {
    return await readlink(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/** Processes whose pid namespace is `ns`. */
export async function processesInNamespace(ns: string): Promise<ProcInfo[]> {
  const all = await listProcesses();
  const marks = await Promise.all(all.map((p) => pidNamespace(p.pid)));
  return all.filter((_, i) => marks[i] === ns);
}

/** One line of /proc/<pid>/mountinfo. */
export interface MountEntry {
  /** Path inside the filesystem that is mounted (`/` unless a bind mount of a subfolder). */
  root: string;
  /** Where it is mounted. */
  mountPoint: string;
  /** Filesystem type (`tmpfs`, `cgroup`, `cgroup2`, ...). */
  fsType: string;
  /** The mount's source (`vtnode-box`, `/dev/vda`, ...). */
  source: string;
  /** Per-superblock options (`rw,size=1024k`, the controllers of a cgroup v1 hierarchy, ...). */
  superOptions: string[];
}

/** Undoes the octal escapes (`\040` for a space) the kernel writes in mountinfo paths. */
function unescapeMountPath(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}

/**
 * Parses /proc/<pid>/mountinfo (proc(5)): `id parent major:minor root mountpoint options [optional
 * fields...] - fstype source superoptions`. Lines that do not have that shape are skipped.
 */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const head = line.slice(0, sep).split(' ');
    const tail = line.slice(sep + 3).split(' ');
    if (head.length < 6 || tail.length < 3) continue;
    out.push({
      root: unescapeMountPath(head[3]!),
      mountPoint: unescapeMountPath(head[4]!),
      fsType: tail[0]!,
      source: unescapeMountPath(tail[1]!),
      superOptions: tail[2]!.split(','),
    });
  }
  return out;
}

/** The mounts this process sees. */
export async function readMounts(): Promise<MountEntry[]> {
  return parseMountinfo(await readFile('/proc/self/mountinfo', 'utf8'));
}

/**
 * A process and its descendants (children listed in /proc/<pid>/task/<tid>/children), read without
 * scanning every process: cheap enough to poll. Orphans inside a pid namespace are re-parented to its
 * init, itself a descendant of the namespace's creator, so they stay in the tree.
 */
export async function processTree(root: number): Promise<ProcInfo[]> {
  const pids = [root];
  for (let i = 0; i < pids.length && i < 4096; i++) {
    const tasks = await readdir(`/proc/${pids[i]}/task`).catch(() => [] as string[]);
    const children = await Promise.all(
      tasks.map((t) => readFile(`/proc/${pids[i]}/task/${t}/children`, 'utf8').catch(() => '')),
    );
    for (const text of children) for (const c of text.split(' ')) if (/^\d+$/.test(c)) pids.push(Number(c));
  }
  const infos = await Promise.all([...new Set(pids)].map(readProc));
  return infos.filter((p): p is ProcInfo => p !== null);
}
