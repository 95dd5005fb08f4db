// The bwrap backend on its own: environment, identity, rlimits, output cap, group kill.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import type { Confinement, RunSpec } from '../../sandbox/confinement.ts';
import { DEFAULT_LIMITS } from '../../sandbox/limits.ts';
import { listProcesses } from '../../sandbox/procfs.ts';

let bwrap: Confinement;
let box: string;
const env = { PATH: '/usr/bin:/bin', HOME: '/nonexistent', VTNODE_ALLOWED: 'yes' };
const spec = (argv: string[], limits: Partial<RunSpec['limits']> = {}): RunSpec => ({
  argv,
  cwd: box,
  box,
  readOnlyPaths: [],
  env,
  limits: { ...DEFAULT_LIMITS, wallMs: 10_000, ...limits },
});

beforeAll(async () => {
  bwrap = await createBwrapConfinement();
  box = await mkdtemp(join(tmpdir(), 'vtnode-confinement-test-'));
});
afterAll(async () => {
  await rm(box, { recursive: true, force: true });
});

describe('bwrap backend', () => {
  it('passes exactly the given environment, and nothing leaks through /proc/1/environ', async () => {
    process.env['VTNODE_PARENT_SECRET'] = 'parent-secret';
    try {
      const r = await bwrap.run(spec(['/bin/sh', '-c', 'env; echo ---; tr "\\0" "\\n" < /proc/1/environ']));
      expect(r.exitCode).toBe(0);
      const [inner, init] = r.stdout.split('---\n');
      const vars = inner!
        .trim()
        .split('\n')
        .filter((l) => !l.startsWith('PWD=') && !l.startsWith('SHLVL=') && !l.startsWith('_='));
      expect(vars.sort()).toEqual(['HOME=/nonexistent', 'PATH=/usr/bin:/bin', 'VTNODE_ALLOWED=yes']);
      expect(r.stdout).not.toContain('parent-secret');
      expect(init!.trim().split('\n')).toEqual(['PATH=/usr/bin:/bin']);
    } finally {
      delete process.env['VTNODE_PARENT_SECRET'];
    }
  });

  it('runs as an unprivileged user with the rlimits applied', async () => {
    const r = await bwrap.run(
      spec(['/bin/sh', '-c', 'id -u; cat /proc/self/limits'], {
        cpuMs: 76_000,
        processes: 99,
        fileSizeBytes: 1048576,
      }),
    );
    expect(r.exitCode).toBe(0);
    const uid = Number(r.stdout.split('\n')[0]);
    expect(uid).not.toBe(0);
    expect(r.stdout).toMatch(/Max cpu time\s+77\s+77/);
    // With per-run cgroups the pids controller is the exact bound and RLIMIT_NPROC a second wall above it.
    const nproc = (bwrap.describe() as { runAccounting?: string }).runAccounting === 'cgroup' ? 198 : 99;
    expect(r.stdout).toMatch(new RegExp(`Max processes\\s+${nproc}\\s+${nproc}`));
    expect(r.stdout).toMatch(/Max file size\s+1048576\s+1048576/);
    expect(r.stdout).toMatch(/Max core file size\s+0\s+0/);
  });

  it('kills the run when its output passes the cap', async () => {
    const r = await bwrap.run(spec(['/usr/bin/yes'], { outputBytes: 65536 }));
    expect(r.outputCapped).toBe(true);
    expect(r.stdout.length + r.stderr.length).toBeLessThanOrEqual(65536);
    expect(r.survivors).toBe(0);
  });

  it('kills the whole run at the wall-clock limit, setsid children included', async () => {
    const marker = `vtnode-wall-${process.pid}`;
    const started = Date.now();
    const r = await bwrap.run(
      spec(['/bin/sh', '-c', `setsid /bin/sh -c 'sleep 100; : ${marker}' & sleep 100`], { wallMs: 800 }),
    );
    expect(r.timedOut).toBe(true);
    expect(r.survivors).toBe(0);
    expect(Date.now() - started).toBeLessThan(5000);
    const left: number[] = [];
    for (const p of await listProcesses()) {
      const cmd = await readFile(`/proc/${p.pid}/cmdline`, 'utf8').catch(() => '');
      if (cmd.includes(marker)) left.push(p.pid);
    }
    expect(left).toEqual([]);
  });

  it('stops at once on abort', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const r = await bwrap.run({ ...spec(['/bin/sleep', '100']), signal: controller.signal });
    expect(r.aborted).toBe(true);
    expect(r.exitCode).toBeNull();
  });

  it('has no network but its own loopback, and a read-only root', async () => {
    const r = await bwrap.run(
      spec([
        '/bin/sh',
        '-c',
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; touch /rootfile 2>/dev/null || echo refused",
      ]),
    );
    expect(r.stdout.trim().split('\n')).toEqual(['lo', 'refused']);
  });
});
