// Per-run cgroups: layout detection (pure), then real runs in a cgroup of their own on this host (v1),
// the sweep of cgroups left by a dead scorer, and the reason given when v2 cannot be used.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { cgroupLayouts, parseKeyed, parseProcCgroup, probeCgroups } from '../../sandbox/cgroup.ts';
import { runGroup } from '../../sandbox/group-run.ts';
import { parseMountinfo } from '../../sandbox/procfs.ts';

const MiB = 1024 ** 2;

/** Mount lines of a host shaped like this one: v1 hierarchies plus a cgroup2 with no controllers. */
const V1_MOUNTS = `25 22 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime shared:5 - cgroup cgroup rw,cpu
27 25 0:25 / /sys/fs/cgroup/cpuacct rw,relatime shared:6 - cgroup cgroup rw,cpuacct
28 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:7 - cgroup cgroup rw,memory
29 25 0:27 / /sys/fs/cgroup/pids rw,relatime shared:8 - cgroup cgroup rw,pids
30 25 0:28 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
31 22 0:40 / /tmp/vtnode\\040boxes/box-1 rw,nosuid,nodev - tmpfs vtnode-box rw,size=1024k,nr_inodes=50`;
const V1_SELF = `8:pids:/
4:memory:/process_api/abc
2:cpuacct:/
1:cpu:/
0::/`;

/** A systemd host on cgroup v2 only, the scorer in a delegated service. */
const V2_MOUNTS =
  '30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate';
const V2_SELF = '0::/system.slice/vtnode.service\n';

describe('layout detection', () => {
  it('parses mountinfo, unescaping paths', () => {
    const m = parseMountinfo(V1_MOUNTS);
    expect(m).toHaveLength(7);
    expect(m[6]).toEqual({
      root: '/',
      mountPoint: '/tmp/vtnode boxes/box-1',
      fsType: 'tmpfs',
      source: 'vtnode-box',
      superOptions: ['rw', 'size=1024k', 'nr_inodes=50'],
    });
    expect(parseMountinfo('garbage\n\n1 2 3 - x')).toEqual([]);
  });

  it('finds our own cgroups on a v1 host (and the controller-less v2 beside them)', () => {
    expect(parseProcCgroup('2:cpu,cpuacct:/a\n0::/b').get('cpuacct')).toBe('/a');
    const l = cgroupLayouts(parseMountinfo(V1_MOUNTS), V1_SELF);
    expect(l.v1).toEqual({
      kind: 'v1',
      memory: '/sys/fs/cgroup/memory/process_api/abc',
      pids: '/sys/fs/cgroup/pids',
      cpu: '/sys/fs/cgroup/cpuacct',
      // The cgroup2 hierarchy without controllers still gives each run its CPU pressure.
      pressure: '/sys/fs/cgroup/unified',
    });
    expect(l.v2?.memory).toBe('/sys/fs/cgroup/unified');
  });

  it('finds our own cgroup on a v2 host; none where a hierarchy is missing or not visible', () => {
    const l = cgroupLayouts(parseMountinfo(V2_MOUNTS), V2_SELF);
    expect(l.v2).toEqual({
      kind: 'v2',
      memory: '/sys/fs/cgroup/system.slice/vtnode.service',
      pids: '/sys/fs/cgroup/system.slice/vtnode.service',
      cpu: '/sys/fs/cgroup/system.slice/vtnode.service',
      pressure: '/sys/fs/cgroup/system.slice/vtnode.service',
    });
    expect(l.v1).toBeNull();
    // A hierarchy mounted from a subtree we are not in (another cgroup namespace) shows nothing of ours.
    const foreign = V2_MOUNTS.replace(' / /sys/fs/cgroup', ' /other /sys/fs/cgroup');
    expect(cgroupLayouts(parseMountinfo(foreign), V2_SELF).v2).toBeNull();
  });

  it('reads keyed counters', () => {
    const k = parseKeyed('oom_kill_disable 0\nunder_oom 0\noom_kill 3\n');
    expect(k.get('oom_kill')).toBe(3);
    expect(parseKeyed('usage_usec 1234\nuser_usec x').get('user_usec')).toBeUndefined();
  });
});

const isRoot = process.getuid?.() === 0;
const self = readFileSync('/proc/self/cgroup', 'utf8');
const layouts = cgroupLayouts(parseMountinfo(readFileSync('/proc/self/mountinfo', 'utf8')), self);
const v2Controllers = layouts.v2
  ? readFileSync(join(layouts.v2.memory, 'cgroup.controllers'), 'utf8').split(/\s+/)
  : [];

/** Per-run cgroups work here: v1 hierarchies, or a v2 one with memory (and pids) to hand out. */
const usable = isRoot && (layouts.v1 !== null || v2Controllers.includes('memory'));

/** Runs `script` with /bin/sh in a fresh cgroup through runGroup (gated, as the backends do). */
async function inCgroup(script: string, limits: { memoryBytes: number; processes: number }, cpuMs = 60_000) {
  const cgroups = await probeCgroups();
  const cg = await cgroups.create(limits);
  try {
    const r = await runGroup({
      argv: ['/bin/sh', '-c', script],
      env: { PATH: '/usr/bin:/bin' },
      cwd: '/',
      wallMs: 20_000,
      cpuMs,
      outputBytes: MiB,
      monitors: [cg!],
    });
    return { r, dirs: cg!.dirs, kind: cgroups.kind };
  } finally {
    await cg?.destroy();
  }
}

describe.runIf(usable)('a run in a cgroup of its own (v1 on this VM; v2 where delegated)', () => {
  const roomy = { memoryBytes: 512 * MiB, processes: 64 };

  it('runs inside its cgroup in every hierarchy, and the cgroup is gone afterwards', async () => {
    const { r, dirs, kind } = await inCgroup('cat /proc/self/cgroup', roomy);
    const name = dirs[0]!.split('/').pop()!;
    const used = kind === 'v2' ? /^0::/ : /:(memory|pids|cpuacct)(,[^:]*)?:/;
    const lines = r.stdout.split('\n').filter((l) => used.test(l));
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l.endsWith(`/${name}`)).toBe(true);
    for (const d of dirs) expect(existsSync(d)).toBe(false);
  });

  it('lists the processes in it (what the backend samples and reaps), and throws once it is gone', async () => {
    const cg = (await (await probeCgroups()).create(roomy))!;
    const child = spawn('/bin/sh', ['-c', 'read _; sleep 30 & sleep 30 & wait'], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    try {
      await cg.attach(child.pid!);
      // Forked after the attach (the shell waits for a line): its children are in the cgroup too.
      child.stdin!.write('go\n');
      for (let i = 0; i < 400 && (await cg.procs()).length < 3; i++) await sleep(25);
      const procs = await cg.procs();
      expect(procs).toContain(child.pid);
      expect(procs).toHaveLength(3);
    } finally {
      await cg.destroy();
      child.kill('SIGKILL');
    }
    await expect(cg.procs()).rejects.toThrow(/ENOENT/);
  });

  it('counts the CPU of processes that already exited, exactly', async () => {
    const burn = "sh -c 'i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done'";
    const { r } = await inCgroup(`${burn}; ${burn}; ${burn}`, roomy);
    expect(r.exitCode).toBe(0);
    expect(r.usage.cpuMs).toBeGreaterThan(100);
    const { r: budget } = await inCgroup(`while :; do ${burn}; done`, roomy, 500);
    expect(budget.cpuExceeded).toBe(true);
    expect(budget.usage.cpuMs).toBeGreaterThan(500);
  });

  it('an OOM kill anywhere in the run is memory; a refused fork is processes', async () => {
    const hog = `${process.execPath} -e 'const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1))'`;
    const { r: mem } = await inCgroup(`${hog} & ${hog} & wait`, { memoryBytes: 128 * MiB, processes: 64 });
    expect(mem.limitExceeded).toBe('memory');
    const { r: pids } = await inCgroup('for i in $(seq 40); do sleep 30 & done; wait', {
      memoryBytes: 512 * MiB,
      processes: 16,
    });
    expect(pids.limitExceeded).toBe('processes');
    expect(pids.survivors).toBe(0);
  });

  it.runIf(layouts.v2 !== null && existsSync(join(layouts.v2?.memory ?? '/', 'cpu.pressure')))(
    "reads the run's own CPU wait from its cgroup2 cpu.pressure: contention counts, sleep does not",
    async () => {
      const waitOf = async (script: string) => {
        const cg = await (await probeCgroups()).create(roomy);
        try {
          const r = await runGroup({
            argv: ['/bin/sh', '-c', script],
            env: { PATH: '/usr/bin:/bin' },
            cwd: '/',
            wallMs: 20_000,
            cpuMs: 60_000,
            outputBytes: MiB,
            monitors: [cg!],
          });
          expect(r.exitCode).toBe(0);
          return await cg!.cpuWait();
        } finally {
          await cg?.destroy();
        }
      };
      // Two busy loops on one CPU: one always waits for the other (and both are dead when it is read).
      const contended = await waitOf(
        'taskset -c 0 sh -c \'timeout 1.5 sh -c "while :; do :; done" & timeout 1.5 sh -c "while :; do :; done"; wait\'',
      );
      expect(contended?.source).toBe('cgroup-psi');
      expect(contended!.ms).toBeGreaterThan(500);
      const sleeping = await waitOf('sleep 1.5');
      expect(sleeping!.ms).toBeLessThan(300);
    },
  );

  it('a cgroup left by a dead scorer is emptied and removed by the next probe', async () => {
    const probe = await (await probeCgroups()).create({ memoryBytes: 512 * MiB, processes: 64 });
    const parent = dirname(probe!.dirs[0]!);
    await probe!.destroy();
    const stale = join(parent, `vtnode-999999999-${Date.now().toString(16)}`);
    await mkdir(stale);
    const orphan = spawn('/bin/sleep', ['60'], { stdio: 'ignore' });
    const exited = new Promise((r) => orphan.once('exit', r));
    await writeFile(join(stale, 'cgroup.procs'), String(orphan.pid));
    expect(await readFile(join(stale, 'cgroup.procs'), 'utf8')).toContain(String(orphan.pid));
    await probeCgroups();
    await exited;
    expect(orphan.signalCode).toBe('SIGKILL');
    expect(existsSync(stale)).toBe(false);
  });
});

describe.runIf(isRoot && layouts.v2 !== null && !v2Controllers.includes('memory'))(
  'cgroup v2 without delegated controllers (this host)',
  () => {
    it('is not used, and the probe says why', async () => {
      const cgroups = await probeCgroups({ mode: 'v2' });
      expect(cgroups.kind).toBe('none');
      expect(cgroups.detail).toMatch(/v2: controller\(s\) memory, pids not available/);
      expect(await cgroups.create({ memoryBytes: 512 * MiB, processes: 64 })).toBeNull();
    });
  },
);
