/**
 * Host paths a run's uid cannot reach, and how the box still gets them.
 *
 * As root, bwrap runs as the run's own pool uid (an unprivileged user namespace), so every path it binds
 * must be reachable by that uid on the host: each folder above it searchable, the path itself readable.
 * A workspace under a closed folder (a root user's home, a `mktemp -d` folder) is not, and bwrap fails
 * before the runner starts. Changing the modes of a user's folders is not vtnode's to do; instead such
 * paths are *staged*: the run starts as root in a mount namespace of its own (`unshare --mount`), binds
 * each blocked path onto an empty folder of a stage any uid can search, drops to the run's uid
 * (`setpriv`) and execs bwrap, which binds the stage to the path's usual place in the box. The stage's
 * mounts exist only in that namespace and end with the run; on the host the stage stays empty folders.
 * Hand-written because no library does this: it is a few stats and a shell line over util-linux.
 */
import { lstat, mkdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** Owner and permission bits of one path, as the kernel's permission check reads them. */
export interface Access {
  mode: number;
  uid: number;
  gid: number;
}

/** Permission bits: read and search. */
const READ = 4;
const SEARCH = 1;

/**
 * Whether `a` grants the bits `want` to a process of `uid` whose only group is `gid` (the pool's runs
 * have no supplementary group): owner bits for the owner, group bits for the group, the rest otherwise.
 * ACLs are not read: a path an ACL opens is staged anyway (harmless), one an ACL closes fails in bwrap.
 */
export function allows(a: Access, uid: number, gid: number, want: number): boolean {
  const shift = a.uid === uid ? 6 : a.gid === gid ? 3 : 0;
  return ((a.mode >> shift) & want) === want;
}

/** Where a path stops being reachable: a folder above it (staging helps) or the path itself (it cannot). */
export type Blocked =
  | { path: string; at: 'parent'; folder: string; isDirectory: boolean }
  | { path: string; at: 'self' };

/**
 * What stands between `uid` and `path`, given the access of every folder above it (outermost first)
 * and of the path itself: the path's own mode, else the first closed folder above it; null when the
 * uid can read it (a folder: list and enter it).
 */
export function obstacle(
  path: string,
  parents: { folder: string; access: Access }[],
  self: Access & { isDirectory: boolean },
  uid: number,
): Blocked | null {
  // The path's own mode first: whatever its parents, staging cannot open a path that is itself closed.
  if (!allows(self, uid, uid, self.isDirectory ? READ | SEARCH : READ)) return { path, at: 'self' };
  const p = parents.find((f) => !allows(f.access, uid, uid, SEARCH));
  return p ? { path, at: 'parent', folder: p.folder, isDirectory: self.isDirectory } : null;
}

/** The folders above an absolute path, outermost first ('/a/b/c' → '/', '/a', '/a/b'). */
export function foldersAbove(path: string): string[] {
  const out: string[] = [];
  for (let d = dirname(path); ; d = dirname(d)) {
    out.unshift(d);
    if (d === dirname(d)) return out;
  }
}

/** Reads what `obstacle` needs from the host; a path that does not exist is left to bwrap to report. */
export async function findObstacle(path: string, uid: number): Promise<Blocked | null> {
  const self = await stat(path).catch(() => null);
  if (!self) return null;
  const parents = await Promise.all(
    foldersAbove(path).map(async (folder) => ({ folder, access: await stat(folder) })),
  );
  return obstacle(path, parents, { ...self, isDirectory: self.isDirectory() }, uid);
}

/** Paths the box reads that `uid` cannot reach on the host, and where they are staged for its run. */
export interface Staging {
  /** Each blocked path and the empty folder of the stage it is bound onto. */
  staged: { path: string; stage: string }[];
}

/** A path whose own mode shuts the run's uid out: staging cannot help, so the run is not started. */
export class UnreachablePathError extends Error {
  readonly path: string;
  constructor(path: string, uid: number) {
    super(
      `the sandbox's uid ${uid} cannot read ${path} (its own mode shuts others out): make it readable ` +
        `by others (chmod o+rX) or keep the workspace somewhere else`,
    );
    this.name = 'UnreachablePathError';
    this.path = path;
  }
}

/** The stage's root: a folder any uid can search, holding one empty folder per staged path of a run. */
export const STAGE_ROOT = join(tmpdir(), 'vtnode-stage');

/**
 * The staging a run of `uid` needs for `paths` (null when every path is reachable). Throws
 * UnreachablePathError for a path whose own mode shuts the uid out. The stage's folders are made on
 * the way (they may have been swept from /tmp since the last run).
 */
export async function stagingFor(paths: string[], uid: number, root = STAGE_ROOT): Promise<Staging | null> {
  const found = await Promise.all(paths.map((p) => findObstacle(p, uid)));
  const blocked = found.filter((b): b is Blocked => b !== null);
  const own = blocked.find((b) => b.at === 'self');
  if (own) throw new UnreachablePathError(own.path, uid);
  if (blocked.length === 0) return null;
  await mkdir(root, { recursive: true, mode: 0o755 });
  await assertOwnStage(root, true);
  const staged: Staging['staged'] = [];
  for (const [i, b] of blocked.entries()) {
    // A bind mount needs a target of its source's kind: a folder for a folder, a file for a file.
    const dir = b.at === 'parent' && b.isDirectory;
    const stage = join(root, dir ? `d${i}` : `f${i}`);
    if (dir) await mkdir(stage, { recursive: true, mode: 0o755 });
    else await writeFile(stage, '', { flag: 'a', mode: 0o644 });
    await assertOwnStage(stage, dir);
    staged.push({ path: b.path, stage });
  }
  return { staged };
}

/**
 * A stage entry is this process's own (root's), of the expected kind, not a link, and writable by no
 * one else: /tmp is everyone's, so a folder planted there first must not become a mount target.
 */
async function assertOwnStage(path: string, folder: boolean): Promise<void> {
  const st = await lstat(path);
  const kindOk = folder ? st.isDirectory() : st.isFile();
  if (!kindOk || st.uid !== process.getuid?.() || (st.mode & 0o022) !== 0)
    throw new Error(
      `${path} is not vtnode's own stage (a link, another owner, or writable by others): remove it`,
    );
}

/** The util-linux programs staging runs (absolute paths). */
export interface StageTools {
  unshare: string;
  setpriv: string;
}

/** The first line a staging step writes to stderr when it fails (bwrap's own failures say `bwrap:`). */
export const STAGE_ERROR_PREFIX = 'vtnode-stage:';

/**
 * The command that runs `argv` (a bwrap command line whose binds already read from the stage) as
 * `uid`: a private mount namespace, the stage's binds made as root, then setpriv drops to the uid and
 * execs it. One process throughout (unshare, sh and setpriv each exec the next), so the run's process
 * is bwrap itself from then on, as without staging.
 */
export function stagedArgv(argv: string[], staging: Staging, uid: number, tools: StageTools): string[] {
  const script =
    `while [ "$1" != -- ]; do mount --bind "$1" "$2" || { echo "${STAGE_ERROR_PREFIX} cannot bind $1" >&2; exit 1; }; ` +
    `shift 2; done; shift; exec ${tools.setpriv} --reuid=${uid} --regid=${uid} --clear-groups -- "$@"`;
  const pairs = staging.staged.flatMap((s) => [s.path, s.stage]);
  return [
    tools.unshare,
    '--mount',
    '--propagation',
    'private',
    '--',
    '/bin/sh',
    '-c',
    script,
    'vtnode-stage',
    ...pairs,
    '--',
    ...argv,
  ];
}

/** Where bwrap binds each read-only path from: its stage when staged, else the path itself. */
export function bindSources(staging: Staging | null): Record<string, string> {
  return Object.fromEntries((staging?.staged ?? []).map((s) => [s.path, s.stage]));
}
