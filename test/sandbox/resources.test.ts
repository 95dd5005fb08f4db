// Resource bombs against the bwrap backend: every class in several variants. Each must end well before
// the wall-clock backstop with the right flag, leave the host's free memory and the boxes' disk where
// they were, and leave an honest run started beside it undisturbed. Caps are small so the suite is fast.
import { readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBox } from '../../sandbox/box.ts';
import {
  BOX_MOUNT_SOURCE,
  type BoxStorageOptions,
  prepareBoxStorage,
  releaseBoxStorage,
} from '../../sandbox/box-storage.ts';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import { cgroupLayouts, probeCgroups } from '../../sandbox/cgroup.ts';
import type { Confinement, ExceededLimit, RunResult } from '../../sandbox/confinement.ts';
import { DEFAULT_LIMITS, type Limits } from '../../sandbox/limits.ts';
import { readMounts } from '../../sandbox/procfs.ts';

const MiB = 1024 ** 2;
const LIMITS: Limits = {
  ...DEFAULT_LIMITS,
  wallMs: 60_000,
  cpuMs: 8000,
  memoryBytes: 256 * MiB,
  processes: 64,
  outputBytes: MiB,
  fileSizeBytes: 8 * MiB,
  diskBytes: 24 * MiB,
  inodes: 1500,
};
/** Per test: a bomb and an honest run side by side, on two cores shared with other work. */
const TEST_MS = 120_000;
const isRoot = process.getuid?.() === 0;
/** The exact half needs what a root scorer uses when the host allows it: run cgroups and box mounts. */
async function exactAvailable(): Promise<boolean> {
  if (!isRoot || (await probeCgroups()).kind === 'none') return false;
  const dir = await mkdtemp(join(tmpdir(), 'vtnode-res-probe-'));
  try {
    return (await prepareBoxStorage(dir)) === 'tmpfs';
  } finally {
    await releaseBoxStorage(dir);
    await rm(dir, { recursive: true, force: true });
  }
}
const exact = await exactAvailable();
const toolchain = dirname(dirname(process.execPath));
const sh = (script: string) => ['/bin/sh', '-c', script];
const node = (code: string) => [process.execPath, '-e', code];

/**
 * What a variant must end with: a flag; or, in the sampled fallback only, where a fork refused by
 * RLIMIT_NPROC is invisible between two samples, `failed` (ending on its own with a failure exit and no
 * flag), `failedOr` (that, or the flag when a sample catches the bomb at its peak before it gives up:
 * which comes first is the machine's timing) or `stopped` (one of the listed flags, whichever the
 * samples catch first, never the wall).
 */
type Outcome =
  | { limit: ExceededLimit }
  | { cpu: true }
  | { wall: true }
  | { failed: true }
  | { failedOr: ExceededLimit }
  | { stopped: Array<ExceededLimit | 'cpu'> };
interface Bomb {
  name: string;
  argv: string[];
  outcome: Outcome;
  limits?: Partial<Limits>;
}

let workspace: string;
let boxesDir: string;

function memAvailable(): number {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return Number(m![1]) * 1024;
}

async function freeDisk(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/** Runs argv in a fresh box; resolves with the result and the box's bytes/inodes just before disposal. */
async function inBox(
  confinement: Confinement,
  storage: BoxStorageOptions,
  argv: string[],
  limits: Limits,
): Promise<{ r: RunResult; elapsed: number }> {
  const box = await createBox({ workspace, boxesDir, storage });
  try {
    const started = performance.now();
    const r = await confinement.run({
      argv,
      cwd: box.dir,
      box: box.dir,
      readOnlyPaths: [toolchain],
      env: { PATH: '/usr/bin:/bin', HOME: join(box.dir, '.home'), TMPDIR: join(box.dir, '.tmp') },
      limits,
    });
    return { r, elapsed: performance.now() - started };
  } finally {
    await box.dispose();
  }
}

/** An honest run: writes and reads back a little, in the box and /tmp, then exits 0. */
const HONEST = sh(
  'dd if=/dev/zero of=data bs=1M count=4 2>/dev/null && mkdir d && touch d/a d/b /tmp/t && sleep 0.3 && wc -c < data && ls d | wc -l',
);

/**
 * Runs the bomb and an honest run side by side, sampling the host's free memory meanwhile, and checks
 * the outcome, the time, the host and the honest run.
 */
async function detonate(
  confinement: Confinement,
  storage: BoxStorageOptions,
  bomb: Bomb,
): Promise<RunResult> {
  const memBefore = memAvailable();
  const diskBefore = await freeDisk(boxesDir);
  let memLowest = memBefore;
  const sampler = setInterval(() => {
    memLowest = Math.min(memLowest, memAvailable());
  }, 100);
  const limits = { ...LIMITS, ...bomb.limits };
  let result: { r: RunResult; elapsed: number };
  let honest: { r: RunResult; elapsed: number };
  try {
    [result, honest] = await Promise.all([
      inBox(confinement, storage, bomb.argv, limits),
      inBox(confinement, storage, HONEST, LIMITS),
    ]);
  } finally {
    clearInterval(sampler);
  }
  const { r, elapsed } = result;
  const detail = `${bomb.name}: ${JSON.stringify({ ...r, stdout: r.stdout.slice(-300), stderr: r.stderr.slice(-300) })}`;
  const o = bomb.outcome;
  if ('stopped' in o) {
    expect(o.stopped, detail).toContain(r.limitExceeded ?? (r.cpuExceeded ? 'cpu' : 'no flag'));
    expect(r.timedOut, detail).toBe(false);
  } else if ('failedOr' in o) {
    expect([o.failedOr, null], detail).toContain(r.limitExceeded);
    expect(r.cpuExceeded, detail).toBe(false);
    expect(r.timedOut, detail).toBe(false);
    if (r.limitExceeded === null) expect(r.exitCode === 0 || r.exitCode === null, detail).toBe(false);
  } else {
    expect(r.limitExceeded, detail).toBe('limit' in o ? o.limit : null);
    expect(r.cpuExceeded, detail).toBe('cpu' in o);
    expect(r.timedOut, detail).toBe('wall' in o);
  }
  expect(r.survivors, detail).toBe(0);
  if ('failed' in o) expect(r.exitCode === 0 || r.exitCode === null, detail).toBe(false);
  // "Quickly" in a unit that load does not stretch: a bomb stopped for a limit spent less than its CPU
  // budget (cpuExceeded is false) and ended before the wall backstop (timedOut is false).
  if (!('wall' in o)) expect(elapsed, detail).toBeLessThan(limits.wallMs);
  // The host: free memory never dipped by more than noise (other work on this shared host moves it by
  // up to about 0.5 GiB), the boxes' filesystem got its space back. Memory and disk bombs aim at 2 GiB
  // or more.
  expect(memBefore - memLowest, `${bomb.name}: lowest MemAvailable during the run`).toBeLessThan(1024 * MiB);
  expect(diskBefore - (await freeDisk(boxesDir)), `${bomb.name}: boxes' disk`).toBeLessThan(64 * MiB);
  const h = honest.r;
  expect(
    [h.exitCode, h.stdout, h.limitExceeded, h.cpuExceeded, h.timedOut],
    `honest beside ${bomb.name}`,
  ).toEqual([0, '4194304\n2\n', null, false, false]);
  return r;
}

/** Writes `count` files of `mb` MiB with dd into `dir`, until one fails; never stops on its own. */
const fillFiles = (dir: string, mb: number) =>
  `mkdir -p ${dir}; i=0; while dd if=/dev/zero of=${dir}/f$i bs=1M count=${mb} 2>/dev/null; do i=$((i+1)); done; echo wrote $i; sleep 60`;
/** Creates empty files (or folders, or hard links) in `dir` with node, as fast as it can, 100k of them. */
const manyInodes = (dir: string, how: 'file' | 'dir' | 'link') =>
  node(`const fs = require('node:fs'); const d = ${JSON.stringify(dir)}; fs.mkdirSync(d, { recursive: true });
fs.writeFileSync(d + '/origin', '');
let i = 0;
try { for (; i < 100000; i++) ${
    how === 'file'
      ? "fs.writeFileSync(d + '/f' + i, '')"
      : how === 'dir'
        ? "fs.mkdirSync(d + '/d' + i)"
        : "fs.linkSync(d + '/origin', d + '/l' + i)"
  }; } catch (e) { console.log('stopped at', i, e.code); }
setInterval(() => {}, 1000);`);

const DISK: Bomb[] = [
  {
    name: 'box: one file growing to 2 GiB (RLIMIT_FSIZE out of the way)',
    argv: sh('dd if=/dev/zero of=big bs=1M count=2048 2>/dev/null; sleep 60'),
    outcome: { limit: 'disk' },
    limits: { fileSizeBytes: 4096 * MiB },
  },
  { name: 'box: many 8 MiB files', argv: sh(fillFiles('fill', 8)), outcome: { limit: 'disk' } },
  {
    name: 'box: fallocate, 8 MiB at a time',
    argv: sh('i=0; while fallocate -l 8M fa$i; do i=$((i+1)); done; echo $i; sleep 60'),
    outcome: { limit: 'disk' },
  },
  {
    name: 'box: deleted files held open',
    argv: sh(
      'for fd in 3 4 5 6 7 8 9; do eval "exec $fd>held$fd"; rm held$fd; dd if=/dev/zero bs=1M count=512 2>/dev/null >&$fd; done; sleep 60',
    ),
    outcome: { limit: 'disk' },
    limits: { fileSizeBytes: 4096 * MiB },
  },
  {
    name: '/dev/shm: one file growing to 2 GiB',
    argv: sh('dd if=/dev/zero of=/dev/shm/big bs=1M count=2048 2>/dev/null; sleep 60'),
    outcome: { limit: 'disk' },
    limits: { fileSizeBytes: 4096 * MiB },
  },
  { name: '/dev/shm: many files', argv: sh(fillFiles('/dev/shm', 4)), outcome: { limit: 'disk' } },
  { name: '/tmp', argv: sh(fillFiles('/tmp', 8)), outcome: { limit: 'disk' } },
  { name: '$TMPDIR', argv: sh(fillFiles('"$TMPDIR"', 8)), outcome: { limit: 'disk' } },
  { name: '$HOME', argv: sh(fillFiles('"$HOME"', 8)), outcome: { limit: 'disk' } },
];

const INODES: Bomb[] = [
  { name: 'box: 100k empty files', argv: manyInodes('many', 'file'), outcome: { limit: 'inodes' } },
  { name: 'box: 100k folders', argv: manyInodes('many', 'dir'), outcome: { limit: 'inodes' } },
  { name: 'box: 100k hard links', argv: manyInodes('many', 'link'), outcome: { limit: 'inodes' } },
  { name: '/tmp: 100k empty files', argv: manyInodes('/tmp/many', 'file'), outcome: { limit: 'inodes' } },
  {
    name: '/dev/shm: 100k empty files',
    argv: manyInodes('/dev/shm/many', 'file'),
    outcome: { limit: 'inodes' },
  },
];

/** `n` processes that each take `mb` MiB (each under RLIMIT_DATA = the run's memory) and hold it. */
const hoarders = (n: number, mb: number) =>
  sh(
    `for i in $(seq ${n}); do ${process.execPath} -e 'const b = Buffer.alloc(${mb} * 1048576, 1); setInterval(() => b[0]++, 1000)' & done; wait`,
  );
const MEMORY: Bomb[] = [
  {
    name: '16 node processes × 128 MiB',
    argv: hoarders(16, 128),
    outcome: { limit: 'memory' },
    // 16 Node processes have about 180 threads: room for them, so that memory is what stops them.
    limits: { processes: 1024 },
  },
  {
    name: '24 dd buffers × 96 MiB held by blocked pipes',
    argv: sh('for i in $(seq 24); do dd if=/dev/zero bs=96M count=1 2>/dev/null | sleep 60 & done; wait'),
    outcome: { limit: 'memory' },
  },
];

/** Spawns itself (its code is its argv[1]) again and again, retrying every refused spawn. */
const RESPAWNER =
  "const { spawn } = require('node:child_process'); const me = process.argv[1]; const go = () => { const c = spawn(process.execPath, ['-e', me, me], { stdio: 'ignore' }); c.on('error', () => setTimeout(go, 5)); c.on('spawn', () => setTimeout(go, 5)); }; go();";
const PROCESSES: Bomb[] = [
  { name: 'fork bomb', argv: sh('f() { f | f & }; f; sleep 60'), outcome: { limit: 'processes' } },
  {
    name: '500 sleepers',
    argv: sh('for i in $(seq 500); do sleep 60 & done; wait'),
    outcome: { limit: 'processes' },
  },
  {
    name: 'thread bomb (worker threads)',
    argv: node(
      "const { Worker } = require('node:worker_threads'); for (let i = 0; i < 200; i++) new Worker('setInterval(() => {}, 1000)', { eval: true, resourceLimits: { maxOldGenerationSizeMb: 4 } }).on('error', () => {});",
    ),
    outcome: { limit: 'processes' },
    limits: { processes: 32, memoryBytes: 1024 * MiB },
  },
  {
    name: 'thread bomb that retries every refused thread',
    argv: node(
      "const { Worker } = require('node:worker_threads'); const start = () => { try { new Worker('setInterval(() => {}, 1000)', { eval: true, resourceLimits: { maxOldGenerationSizeMb: 4 } }).on('error', () => {}); } catch {} }; for (let i = 0; i < 200; i++) start(); setInterval(start, 5);",
    ),
    outcome: { limit: 'processes' },
    limits: { processes: 32, memoryBytes: 1024 * MiB },
  },
  {
    name: 'node processes that respawn whenever a spawn is refused',
    argv: [process.execPath, '-e', RESPAWNER, RESPAWNER],
    outcome: { limit: 'processes' },
    limits: { memoryBytes: 1024 * MiB },
  },
];

/** The variants of `bombs` with these names. */
const pick = (bombs: Bomb[], ...names: string[]) => bombs.filter((b) => names.includes(b.name));

/** Fork bombs that outlive their refused forks: what the sampled fallback must stop by a flag. */
const SAMPLED_FORK_BOMBS: Bomb[] = [
  {
    ...pick(PROCESSES, 'thread bomb that retries every refused thread')[0]!,
    outcome: { stopped: ['processes', 'cpu'] },
    limits: { processes: 32, cpuMs: 3000, memoryBytes: 1024 * MiB },
  },
  {
    name: 'fork bomb, then a busy loop',
    argv: sh('f() { f | f & }; f; while :; do :; done'),
    outcome: { stopped: ['processes', 'cpu'] },
    limits: { cpuMs: 1500 },
  },
  {
    // Node reports a refused spawn as an event, so each process goes on trying: the uid stays at its
    // RLIMIT_NPROC for as long as the run lives.
    ...pick(PROCESSES, 'node processes that respawn whenever a spawn is refused')[0]!,
    outcome: { stopped: ['processes', 'cpu'] },
    limits: { cpuMs: 3000, memoryBytes: 1024 * MiB },
  },
];

const CPU: Bomb[] = [
  {
    name: 'three shell burners',
    argv: sh('for i in 1 2 3; do (while :; do :; done) & done; wait'),
    outcome: { cpu: true },
    limits: { cpuMs: 2000 },
  },
  { name: 'node busy loop', argv: node('for (;;) {}'), outcome: { cpu: true }, limits: { cpuMs: 2000 } },
  {
    name: 'short-lived burners (dead processes count)',
    argv: sh("while :; do sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; done"),
    outcome: { cpu: true },
    limits: { cpuMs: 2000 },
  },
];

const WAITS: Bomb[] = [
  { name: 'sleep forever', argv: sh('sleep 600'), outcome: { wall: true }, limits: { wallMs: 1500 } },
  {
    name: 'blocked on a fifo',
    argv: sh('mkfifo p; cat p'),
    outcome: { wall: true },
    limits: { wallMs: 1500 },
  },
  {
    name: 'idle node timer',
    argv: node('setInterval(() => {}, 100000)'),
    outcome: { wall: true },
    limits: { wallMs: 2500 },
  },
];

beforeAll(async () => {
  workspace = await mkdtemp(join(tmpdir(), 'vtnode-res-ws-'));
  await mkdir(join(workspace, 'src'));
  await writeFile(join(workspace, 'src', 'index.js'), 'export const x = 1;\n');
  boxesDir = await mkdtemp(join(tmpdir(), 'vtnode-res-boxes-'));
  // Runs have uids of their own: they must be able to reach their box, as in createBox's default folder.
  await chmod(boxesDir, 0o755);
});

afterAll(async () => {
  const left = await readdir(boxesDir).catch(() => []);
  const mounts = await readFile('/proc/self/mountinfo', 'utf8');
  await rm(boxesDir, { recursive: true, force: true });
  await rm(workspace, { recursive: true, force: true });
  expect(left).toEqual([]);
  expect(mounts).not.toContain(`${boxesDir}/`);
});

// Linux as root: each run in its own cgroup (exact CPU, memory, processes), each box its own tmpfs.
// Skipped where the host refuses either (not root, a container without mount rights or cgroups).
describe.runIf(exact)('exact bounds (cgroup + tmpfs box)', () => {
  let bwrap: Confinement;
  const storage: BoxStorageOptions = {};
  beforeAll(async () => {
    bwrap = await createBwrapConfinement();
    expect(bwrap.describe()['runAccounting']).toBe('cgroup');
  });

  it(
    'boxes are their own tmpfs, and each run has a cgroup of its own, removed afterwards',
    async () => {
      const layouts = cgroupLayouts(await readMounts(), await readFile('/proc/self/cgroup', 'utf8'));
      const folders = [layouts.v2, layouts.v1].flatMap((l) => (l ? [l.memory, l.pids, l.cpu] : []));
      const parents = [...new Set(folders)];
      const ours = async () => {
        const names = await Promise.all(parents.map((p) => readdir(p).catch(() => [] as string[])));
        return names.flat().filter((n) => n.startsWith(`vtnode-${process.pid}-`));
      };
      const run = inBox(
        bwrap,
        storage,
        sh('df --output=source . /tmp /dev/shm | tail -n 3; sleep 1'),
        LIMITS,
      );
      let seen: string[] = [];
      for (const deadline = Date.now() + 10_000; seen.length === 0 && Date.now() < deadline; )
        seen = await new Promise<string[]>((r) => setTimeout(() => void ours().then(r), 50));
      const { r } = await run;
      expect(r.stdout.trim().split('\n')).toEqual([BOX_MOUNT_SOURCE, BOX_MOUNT_SOURCE, BOX_MOUNT_SOURCE]);
      expect(seen.length).toBeGreaterThan(0);
      expect(await ours()).toEqual([]);
    },
    TEST_MS,
  );

  it.each(DISK)('disk: $name', async (bomb) => void (await detonate(bwrap, storage, bomb)), TEST_MS);
  it.each(INODES)('inodes: $name', async (bomb) => void (await detonate(bwrap, storage, bomb)), TEST_MS);
  it.each(MEMORY)('memory: $name', async (bomb) => void (await detonate(bwrap, storage, bomb)), TEST_MS);
  it.each(PROCESSES)(
    'processes: $name',
    async (bomb) => void (await detonate(bwrap, storage, bomb)),
    TEST_MS,
  );
  it.each(CPU)(
    'cpu: $name',
    async (bomb) => {
      const r = await detonate(bwrap, storage, bomb);
      expect(r.usage.cpuMs).toBeGreaterThan(2000);
    },
    TEST_MS,
  );
  it.each(WAITS)(
    'wall: $name',
    async (bomb) => {
      const r = await detonate(bwrap, storage, bomb);
      expect(r.usage.cpuMs).toBeLessThan(1000);
    },
    TEST_MS,
  );
});

// The fallback (no cgroup, a plain-folder box): what a non-root Linux host gets. Sampled, so bounded
// by the sampling period rather than exact; one variant per class that the fallback must still stop.
describe('sampled bounds (no cgroup, plain-folder box)', () => {
  let bwrap: Confinement;
  const storage: BoxStorageOptions = { mode: 'directory' };
  beforeAll(async () => {
    bwrap = await createBwrapConfinement({ cgroups: { mode: 'none' } });
    expect(bwrap.describe()['runAccounting']).toBe('sampled');
  });
  it.each([
    ...pick(DISK, 'box: many 8 MiB files', 'box: deleted files held open', '/dev/shm: many files', '/tmp'),
    ...pick(INODES, 'box: 100k empty files', '/tmp: 100k empty files'),
    ...pick(MEMORY, '16 node processes × 128 MiB'),
    // Forks and threads refused by RLIMIT_NPROC leave no trace to sample, and a shell that cannot fork
    // (or a Worker constructor that throws) gives up: such a bomb collapses within milliseconds,
    // between two samples. So the fallback's variants are bombs that go on after the refusals
    // (bounded by CPU or by the processes they are seen to hold), and one that gives up (bounded by
    // itself, well before the wall, unless a sample catches its 64 sleepers first: on a loaded machine
    // the shell is slow to give up).
    ...SAMPLED_FORK_BOMBS,
    { ...pick(PROCESSES, '500 sleepers')[0]!, outcome: { failedOr: 'processes' } },
    ...pick(CPU, 'three shell burners', 'short-lived burners (dead processes count)'),
    ...pick(WAITS, 'sleep forever'),
  ] as Bomb[])('$name', async (bomb) => void (await detonate(bwrap, storage, bomb)), TEST_MS);
});
