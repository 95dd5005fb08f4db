// Paths the run's uid cannot reach on the host (a workspace under a 0700 folder, as root): the pure
// reading of modes, the staged command line, and real bwrap runs and services that read through a
// closed folder without any mode on the host changing (issue 26, build 4).
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapArgv, bwrapFeatures, createBwrapConfinement, setupFailure } from '../../sandbox/bwrap.ts';
import type { Confinement, RunSpec, SpawnedProcess } from '../../sandbox/confinement.ts';
import { DEFAULT_LIMITS } from '../../sandbox/limits.ts';
import {
  type Access,
  allows,
  bindSources,
  foldersAbove,
  obstacle,
  STAGE_ERROR_PREFIX,
  stagedArgv,
  stagingFor,
  UnreachablePathError,
} from '../../sandbox/reach.ts';

const UID = 61234;
const open = (mode: number, uid = 0): Access => ({ mode, uid, gid: uid });

describe('reading modes as the run uid (pure)', () => {
  it('takes the owner bits for the owner, the group bits for the group, the others bits otherwise', () => {
    expect(allows(open(0o700, UID), UID, UID, 5)).toBe(true);
    expect(allows(open(0o700), UID, UID, 1)).toBe(false);
    expect(allows(open(0o711), UID, UID, 1)).toBe(true);
    expect(allows(open(0o711), UID, UID, 4)).toBe(false);
    expect(allows({ mode: 0o750, uid: 0, gid: UID }, UID, UID, 5)).toBe(true);
    // The owner's bits apply to the owner even when others have more.
    expect(allows(open(0o077, UID), UID, UID, 4)).toBe(false);
  });

  it('names the first closed folder above a path, or the path itself, or nothing', () => {
    const parents = (...modes: number[]) =>
      foldersAbove('/root/ws/node_modules').map((folder, i) => ({ folder, access: open(modes[i]!) }));
    expect(foldersAbove('/root/ws/node_modules')).toEqual(['/', '/root', '/root/ws']);
    expect(foldersAbove('/x')).toEqual(['/']);
    const dir = { ...open(0o755), isDirectory: true };
    expect(obstacle('/root/ws/node_modules', parents(0o755, 0o700, 0o755), dir, UID)).toEqual({
      path: '/root/ws/node_modules',
      at: 'parent',
      folder: '/root',
      isDirectory: true,
    });
    expect(obstacle('/root/ws/node_modules', parents(0o755, 0o711, 0o755), dir, UID)).toBeNull();
    // A folder must be listable and enterable; a file readable.
    const self = (mode: number, isDirectory: boolean) => ({ ...open(mode), isDirectory });
    expect(obstacle('/root/ws/node_modules', parents(0o755, 0o755, 0o755), self(0o751, true), UID)).toEqual({
      path: '/root/ws/node_modules',
      at: 'self',
    });
    expect(
      obstacle('/root/ws/node_modules', parents(0o755, 0o755, 0o755), self(0o644, false), UID),
    ).toBeNull();
    // Closed itself under a closed folder: staging cannot help, so that is what is named.
    expect(obstacle('/root/ws/node_modules', parents(0o755, 0o700, 0o755), self(0o700, true), UID)).toEqual({
      path: '/root/ws/node_modules',
      at: 'self',
    });
  });

  it('stages through a private mount namespace, then drops to the uid and runs the command unchanged', () => {
    const staging = {
      staged: [
        { path: '/root/ws/node_modules', stage: '/tmp/vtnode-stage/d0' },
        { path: '/root/ws/tool.cjs', stage: '/tmp/vtnode-stage/f1' },
      ],
    };
    const argv = stagedArgv(['/usr/bin/bwrap', '--', 'node', 'x'], staging, UID, {
      unshare: '/usr/bin/unshare',
      setpriv: '/usr/bin/setpriv',
    });
    expect(argv.slice(0, 7)).toEqual([
      '/usr/bin/unshare',
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
    ]);
    expect(argv[7]).toContain(`exec /usr/bin/setpriv --reuid=${UID} --regid=${UID} --clear-groups -- "$@"`);
    expect(argv.slice(8)).toEqual([
      'vtnode-stage',
      '/root/ws/node_modules',
      '/tmp/vtnode-stage/d0',
      '/root/ws/tool.cjs',
      '/tmp/vtnode-stage/f1',
      '--',
      '/usr/bin/bwrap',
      '--',
      'node',
      'x',
    ]);
    // bwrap binds the stage where the path belongs; other paths from themselves.
    const a = bwrapArgv({
      bwrap: '/usr/bin/bwrap',
      prlimit: '/usr/bin/prlimit',
      features: bwrapFeatures('bubblewrap 0.8.0'),
      system: [],
      readOnly: ['/root/ws/node_modules', '/opt/node'],
      sources: bindSources(staging),
      box: '/tmp/box',
      protect: [],
      cwd: '/tmp/box',
      env: {},
      limits: DEFAULT_LIMITS,
      scratch: { tmp: '/tmp/box/t', shm: '/tmp/box/s' },
      argv: ['node'],
    }).join(' ');
    expect(a).toContain('--ro-bind /tmp/vtnode-stage/d0 /root/ws/node_modules');
    expect(a).toContain('--ro-bind /opt/node /opt/node');
    expect(bindSources(null)).toEqual({});
  });

  it("reads bwrap's or staging's own failure (exit 1, its line first, no report) as a setup failure", () => {
    const r = (exitCode: number | null, stderr: string, report?: string) => ({
      exitCode,
      stderr,
      ...(report !== undefined ? { report: { text: report, overflow: false } } : {}),
    });
    expect(setupFailure(r(1, "bwrap: Can't find source path /x: Permission denied\n"))).toBe(
      "bwrap: Can't find source path /x: Permission denied",
    );
    expect(setupFailure(r(1, `${STAGE_ERROR_PREFIX} cannot bind /x\n`, ''))).toMatch(/cannot bind/);
    expect(setupFailure(r(1, 'unshare: unshare failed: Operation not permitted\n'))).toMatch(/^unshare:/);
    expect(setupFailure(r(1, 'Error: bwrap: not ours\n'))).toBeNull();
    expect(setupFailure(r(2, 'bwrap: x\n'))).toBeNull();
    // A report came through: the command ran.
    expect(setupFailure(r(1, 'bwrap: x\n', '{"ok":true}'))).toBeNull();
  });
});

describe.runIf(process.getuid?.() === 0)('bwrap as root, a read-only path under a 0700 folder', () => {
  let bwrap: Confinement;
  let closed: string;
  let data: string;
  let box: string;
  const spec = (argv: string[], readOnlyPaths: string[]): RunSpec => ({
    argv,
    cwd: box,
    box,
    readOnlyPaths,
    env: { PATH: '/usr/bin:/bin' },
    limits: { ...DEFAULT_LIMITS, wallMs: 20_000 },
  });

  beforeAll(async () => {
    bwrap = await createBwrapConfinement();
    // What a root user's home looks like to the pool uid: a folder it cannot search.
    closed = await mkdtemp(join(tmpdir(), 'vt-reach-closed-'));
    data = join(closed, 'ws', 'node_modules');
    await mkdir(data, { recursive: true, mode: 0o755 });
    await chmod(join(closed, 'ws'), 0o755);
    await writeFile(join(data, 'value.txt'), 'reached\n', { mode: 0o644 });
    box = await mkdtemp(join(tmpdir(), 'vt-reach-box-'));
  });
  afterAll(async () => {
    await rm(closed, { recursive: true, force: true });
    await rm(box, { recursive: true, force: true });
  });

  it('the uid reads it in the box at its own path, and nothing changes on the host', async () => {
    expect((await stat(closed)).mode & 0o777).toBe(0o700);
    const r = await bwrap.run(spec(['/bin/sh', '-c', `id -u; cat ${data}/value.txt`], [data]));
    expect(r.setupFailed ?? null).toBeNull();
    expect(r.exitCode, r.stderr).toBe(0);
    const [uid, text] = r.stdout.trim().split('\n');
    expect(Number(uid)).not.toBe(0);
    expect(text).toBe('reached');
    expect((await stat(closed)).mode & 0o777).toBe(0o700);
    // The stage's binds lived in the run's own mount namespace only.
    expect(await readFile('/proc/self/mounts', 'utf8')).not.toContain('vtnode-stage');
  });

  it('still cannot write it, nor see the rest of the closed folder', async () => {
    const r = await bwrap.run(
      spec(['/bin/sh', '-c', `touch ${data}/w 2>/dev/null && echo wrote; ls ${closed}`], [data]),
    );
    expect(r.stdout).not.toContain('wrote');
    expect(r.stdout.trim().split('\n')).toEqual(['ws']);
  });

  it('a long-lived service reads it too', async () => {
    const p: SpawnedProcess = await bwrap.spawn({
      argv: ['/bin/cat', `${data}/value.txt`],
      cwd: '/',
      readOnlyPaths: [data],
      env: { PATH: '/usr/bin:/bin' },
      limits: DEFAULT_LIMITS,
    });
    let out = '';
    p.stdout.setEncoding('utf8');
    p.stdout.on('data', (c: string) => {
      out += c;
    });
    const exit = await p.exited;
    expect(exit.exitCode).toBe(0);
    expect(out).toBe('reached\n');
  });

  it('a path whose own mode shuts the uid out is refused before the run starts, saying what to do', async () => {
    const shut = join(closed, 'shut');
    await mkdir(shut, { mode: 0o700 });
    await expect(bwrap.run(spec(['/bin/true'], [shut]))).rejects.toThrow(UnreachablePathError);
    await expect(stagingFor([shut], UID)).rejects.toThrow(/chmod o\+rX/);
  });

  it('a stage planted in /tmp by someone else (a link, another owner, writable by others) is refused', async () => {
    const blocked = [data];
    const planted = join(closed, 'planted');
    await mkdir(join(closed, 'elsewhere'));
    await symlink(join(closed, 'elsewhere'), planted);
    await expect(stagingFor(blocked, UID, planted)).rejects.toThrow(/not vtnode's own stage/);
    const open = join(closed, 'open-stage');
    await mkdir(open);
    await chmod(open, 0o777);
    await expect(stagingFor(blocked, UID, open)).rejects.toThrow(/not vtnode's own stage/);
    const theirs = join(closed, 'their-stage');
    await mkdir(join(theirs, 'd0'), { recursive: true });
    await chown(join(theirs, 'd0'), UID, UID);
    await expect(stagingFor(blocked, UID, theirs)).rejects.toThrow(/not vtnode's own stage/);
    // vtnode's own: accepted, one folder per blocked folder.
    const own = join(closed, 'own-stage');
    expect(await stagingFor(blocked, UID, own)).toEqual({ staged: [{ path: data, stage: join(own, 'd0') }] });
  });

  it("bwrap's own failure to set a run up is reported as such (never as the command's exit)", async () => {
    const r = await bwrap.run(spec(['/bin/true'], [join(closed, 'ws', 'missing')]));
    expect(r.exitCode).toBe(1);
    expect(r.setupFailed).toMatch(/^bwrap: Can't find source path/);
  });
});
