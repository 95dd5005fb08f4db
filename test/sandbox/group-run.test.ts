// runGroup's gate and budgets, and how a task's time limit becomes a CPU budget and a wall backstop.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatedArgv, runGroup } from '../../sandbox/group-run.ts';
import { DEFAULT_LIMITS, limitsFor, rlimitCpuSeconds } from '../../sandbox/limits.ts';
import { createUnconfined } from '../../sandbox/unconfined.ts';

const MiB = 1024 ** 2;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vtnode-group-run-test-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('limits from a task time limit', () => {
  it('a CPU budget of one core for the limit, a wall backstop three times longer', () => {
    const l = limitsFor(30_000);
    expect([l.cpuMs, l.wallMs]).toEqual([30_000, 90_000]);
    expect(l.memoryBytes).toBe(DEFAULT_LIMITS.memoryBytes);
    expect(rlimitCpuSeconds(l)).toBe(31);
    const custom = limitsFor(10_000, DEFAULT_LIMITS, { cpuPerWallMs: 2, wallFactor: 5 });
    expect([custom.cpuMs, custom.wallMs]).toEqual([20_000, 50_000]);
    expect(rlimitCpuSeconds({ ...l, cpuMs: 1500 })).toBe(3);
  });
});

describe('the gate', () => {
  const base = { env: { PATH: '/usr/bin:/bin' }, cwd: dir, wallMs: 10_000, cpuMs: 10_000, outputBytes: MiB };

  it('holds the leader until every monitor attached it, then runs argv with the exact environment', async () => {
    const marker = join(dir, 'ran');
    const held: string[] = [];
    const r = await runGroup({
      ...base,
      cwd: dir,
      argv: ['/bin/sh', '-c', `env; : > ${marker}`],
      monitors: [
        {
          attach: async (pid) => {
            held.push((await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' '));
            held.push(String(existsSync(marker)));
          },
        },
      ],
    });
    expect(held[0]).toContain('vtnode-gate');
    expect(held[1]).toBe('false');
    expect(r.exitCode).toBe(0);
    expect(existsSync(marker)).toBe(true);
    expect(r.stdout.split('\n').filter((l) => l && !l.startsWith('SHLVL='))).toEqual([
      'PATH=/usr/bin:/bin',
      `PWD=${dir}`,
    ]);
    expect(gatedArgv(['x'], { PWD: '/a' })[2]).not.toContain('unset PWD');
  });

  it('a failed attach never lets the command run', async () => {
    const marker = join(dir, 'never');
    let leader = 0;
    await expect(
      runGroup({
        ...base,
        argv: ['/bin/sh', '-c', `: > ${marker}`],
        monitors: [
          {
            attach: async (pid) => {
              leader = pid;
              throw new Error('no cgroup today');
            },
          },
        ],
      }),
    ).rejects.toThrow(/cannot start the run: no cgroup today/);
    expect(existsSync(marker)).toBe(false);
    // The held leader was killed (a zombie until reaped counts as gone): wait for the kill to land.
    const stateOf = async () => {
      const stat = await readFile(`/proc/${leader}/stat`, 'utf8').catch(() => ') Z');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    };
    let state = await stateOf();
    for (
      const deadline = Date.now() + 10_000;
      state !== 'Z' && Date.now() < deadline;
      state = await stateOf()
    )
      await new Promise((r) => setTimeout(r, 20));
    expect(state).toBe('Z');
  });
});

describe('budgets without a cgroup (unconfined: sampled over the process group)', () => {
  const unconfined = createUnconfined();
  const spec = (argv: string[], limits: Partial<typeof DEFAULT_LIMITS>) => ({
    argv,
    cwd: dir,
    box: dir,
    readOnlyPaths: [],
    env: { PATH: '/usr/bin:/bin' },
    limits: { ...DEFAULT_LIMITS, wallMs: 20_000, ...limits },
  });

  it('burning CPU in several processes spends the budget: cpuExceeded, not a timeout', async () => {
    const r = await unconfined.run(
      spec(['/bin/sh', '-c', 'for i in 1 2; do (while :; do :; done) & done; wait'], { cpuMs: 1000 }),
    );
    expect([r.cpuExceeded, r.timedOut]).toEqual([true, false]);
    expect(r.usage.cpuMs).toBeGreaterThan(1000);
  });

  it('waiting spends nothing: the wall backstop ends it as a timeout', async () => {
    const r = await unconfined.run(spec(['/bin/sleep', '30'], { cpuMs: 1000, wallMs: 800 }));
    expect([r.cpuExceeded, r.timedOut]).toEqual([false, true]);
  });

  it('writing past the box quota is disk', async () => {
    const r = await unconfined.run(
      spec(
        ['/bin/sh', '-c', 'i=0; while dd if=/dev/zero of=f$i bs=1M count=2 2>/dev/null; do i=$((i+1)); done'],
        {
          diskBytes: 8 * MiB,
          fileSizeBytes: 2 * MiB,
        },
      ),
    );
    expect(r.limitExceeded).toBe('disk');
  });
});
