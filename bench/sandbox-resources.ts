// Resource bounds benchmark: the per-run cost of a box tmpfs and a run cgroup (vs a plain-folder box and
// no cgroup, in the same run), and how far each bomb gets before it is stopped.
// Run as root on Linux: npx node bench/sandbox-resources.ts [--rounds N]
import { readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { createBox } from '../sandbox/box.ts';
import { type BoxStorageOptions, watchBoxStorage } from '../sandbox/box-storage.ts';
import { createBwrapConfinement } from '../sandbox/bwrap.ts';
import type { Confinement } from '../sandbox/confinement.ts';
import { DEFAULT_LIMITS, type Limits } from '../sandbox/limits.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '15' } } });
const rounds = Number(values.rounds);
const MiB = 1024 ** 2;
const toolchain = dirname(dirname(process.execPath));

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const memAvailable = () =>
  Number(/^MemAvailable:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]) * 1024;

const workspace = await mkdtemp(join(tmpdir(), 'vtnode-bench-res-ws-'));
await mkdir(join(workspace, 'src'));
await writeFile(join(workspace, 'src', 'index.js'), 'export const x = 1;\n'.repeat(100));
const boxesDir = await mkdtemp(join(tmpdir(), 'vtnode-bench-res-boxes-'));
await chmod(boxesDir, 0o755);

interface Mode {
  name: string;
  confinement: Confinement;
  storage: BoxStorageOptions;
}
const modes: Mode[] = [
  {
    name: 'plain (folder box, no cgroup)',
    confinement: await createBwrapConfinement({ cgroups: { mode: 'none' } }),
    storage: { mode: 'directory' },
  },
  { name: 'exact (tmpfs box, run cgroup)', confinement: await createBwrapConfinement(), storage: {} },
];

/** One run of argv in a fresh box, timed per phase (ms); `measure` reads the box before disposal. */
async function phases(mode: Mode, argv: string[], limits: Limits) {
  const t0 = performance.now();
  const box = await createBox({ workspace, boxesDir, storage: mode.storage });
  const t1 = performance.now();
  // A watch of our own, taken before the run, to tell what the run added (the backend takes its own).
  const watch = argv[0] === '/bin/true' ? null : await watchBoxStorage(box.dir, limits);
  const t1b = performance.now();
  const r = await mode.confinement.run({
    argv,
    cwd: box.dir,
    box: box.dir,
    readOnlyPaths: [toolchain],
    env: { PATH: '/usr/bin:/bin', HOME: join(box.dir, '.home'), TMPDIR: join(box.dir, '.tmp') },
    limits,
  });
  const t2 = performance.now();
  const added = await watch?.added().catch(() => null);
  const t3 = performance.now();
  await box.dispose();
  const t4 = performance.now();
  return {
    r,
    added,
    create: t1 - t0,
    run: t2 - t1b,
    dispose: t4 - t3,
    total: t1 - t0 + (t2 - t1b) + (t4 - t3),
  };
}

const limits: Limits = { ...DEFAULT_LIMITS, wallMs: 30_000, cpuMs: 10_000 };
for (const [label, argv] of [
  ['/bin/true', ['/bin/true']],
  ["node -e ''", [process.execPath, '-e', '']],
] as const) {
  const samples = new Map(
    modes.map((m) => [
      m.name,
      { create: [] as number[], run: [] as number[], dispose: [] as number[], total: [] as number[] },
    ]),
  );
  // Alternate the modes so that load from elsewhere hits both alike.
  for (let i = 0; i < rounds; i++)
    for (const mode of i % 2 ? [...modes].reverse() : modes) {
      const p = await phases(mode, [...argv], limits);
      if (p.r.exitCode !== 0) throw new Error(`${label} failed in ${mode.name}: ${p.r.stderr}`);
      const s = samples.get(mode.name)!;
      for (const k of ['create', 'run', 'dispose', 'total'] as const) s[k].push(p[k]);
    }
  const base = median(samples.get(modes[0]!.name)!.total);
  for (const mode of modes) {
    const s = samples.get(mode.name)!;
    const f = (k: keyof typeof s) => median(s[k]).toFixed(0).padStart(4);
    process.stdout.write(
      `${label.padEnd(10)} ${mode.name.padEnd(30)} createBox ${f('create')} ms  run ${f('run')} ms  dispose ${f('dispose')} ms  total ${f('total')} ms  ×${(median(s.total) / base).toFixed(2)}\n`,
    );
  }
}

const small: Limits = {
  ...limits,
  memoryBytes: 256 * MiB,
  processes: 64,
  fileSizeBytes: 8 * MiB,
  diskBytes: 24 * MiB,
  inodes: 1500,
  cpuMs: 2000,
};
const sh = (s: string) => ['/bin/sh', '-c', s];
const bombs: [string, string[], Partial<Limits>][] = [
  [
    'disk: 8 MiB files in the box',
    sh('i=0; while dd if=/dev/zero of=f$i bs=1M count=8 2>/dev/null; do i=$((i+1)); done; sleep 60'),
    {},
  ],
  [
    'disk: one file (FSIZE 64 MiB)',
    sh('dd if=/dev/zero of=big bs=1M count=1024 2>/dev/null; sleep 60'),
    { fileSizeBytes: 64 * MiB },
  ],
  [
    'disk: /dev/shm 2 GiB',
    sh('dd if=/dev/zero of=/dev/shm/big bs=1M count=2048 2>/dev/null; sleep 60'),
    { fileSizeBytes: 4096 * MiB },
  ],
  [
    'inodes: 100k files',
    [
      process.execPath,
      '-e',
      "const fs=require('fs');for(let i=0;i<1e5;i++)try{fs.writeFileSync('f'+i,'')}catch{break}setInterval(()=>{},1e3)",
    ],
    {},
  ],
  [
    'memory: 16 × 128 MiB node',
    sh(
      `for i in $(seq 16); do ${process.execPath} -e 'const b=Buffer.alloc(128<<20,1);setInterval(()=>b[0]++,1e3)' & done; wait`,
    ),
    { processes: 1024 },
  ],
  ['processes: fork bomb', sh('f() { f | f & }; f; sleep 60'), {}],
  ['cpu: 3 burners', sh('for i in 1 2 3; do (while :; do :; done) & done; wait'), {}],
  ['wall: sleep', sh('sleep 600'), { wallMs: 2000 }],
];
process.stdout.write(
  '\nbomb                               mode     flag          ended after  box added (bytes / inodes)  host MemAvailable dip  boxes disk delta\n',
);
for (const mode of modes) {
  for (const [name, argv, extra] of bombs) {
    const disk0 = await statfs(boxesDir);
    const mem0 = memAvailable();
    let low = mem0;
    const timer = setInterval(() => {
      low = Math.min(low, memAvailable());
    }, 50);
    const p = await phases(mode, argv, { ...small, ...extra });
    clearInterval(timer);
    const disk1 = await statfs(boxesDir);
    const flag =
      p.r.limitExceeded ?? (p.r.cpuExceeded ? 'cpu' : p.r.timedOut ? 'wall' : `exit ${p.r.exitCode}`);
    const added = p.added ? `${(p.added.bytes / MiB).toFixed(1)} MiB / ${p.added.inodes}` : '?';
    process.stdout.write(
      `${name.padEnd(34)} ${mode.name.split(' ')[0]!.padEnd(8)} ${flag.padEnd(13)} ${(p.r.usage.wallMs / 1000).toFixed(2).padStart(7)} s  ${added.padStart(26)}  ${((mem0 - low) / MiB).toFixed(0).padStart(15)} MiB  ${(((disk0.bavail - disk1.bavail) * disk0.bsize) / MiB).toFixed(0).padStart(10)} MiB\n`,
    );
  }
}
await rm(boxesDir, { recursive: true, force: true });
await rm(workspace, { recursive: true, force: true });
process.stdout.write(
  `\n${rounds} rounds per overhead row (medians); node ${process.version}; load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}\n`,
);
