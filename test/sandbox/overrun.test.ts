// The hang rule (sandbox/overrun.ts): a run that outlives its reference's yardstick with a CPU on offer
// is the candidate's timeout; one the host kept from the CPU is starved (infrastructure).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostCpuWait, parsePressureSome, waitFromIdle } from '../../sandbox/cpu-wait.ts';
import { DEFAULT_LIMITS, limitsFor } from '../../sandbox/limits.ts';
import {
  type CpuWait,
  DEFAULT_HANG_POLICY,
  hangBounds,
  judgeOverrun,
  type OverrunInput,
  type WaitSource,
} from '../../sandbox/overrun.ts';

const policy = DEFAULT_HANG_POLICY;
/** A fast reference: the 30 s floor decides both bounds. */
const fast = { wallMs: 2_000, cpuMs: 1_500 };
const BACKSTOP = 180_000;
const input = (over: Partial<OverrunInput>): OverrunInput => ({
  wallMs: 0,
  cpuMs: 0,
  reference: fast,
  waited: { ms: 0, source: 'cgroup-psi' },
  backstopMs: BACKSTOP,
  policy,
  ...over,
});

describe('bounds', () => {
  it('three times the reference, at least 30 s, at most two thirds of the backstop', () => {
    expect(hangBounds(fast, BACKSTOP, policy)).toEqual({ wallMs: 30_000, cpuMs: 30_000 });
    expect(hangBounds({ wallMs: 20_000, cpuMs: 12_000 }, BACKSTOP, policy)).toEqual({
      wallMs: 60_000,
      cpuMs: 36_000,
    });
    expect(hangBounds({ wallMs: 100_000, cpuMs: 90_000 }, BACKSTOP, policy)).toEqual({
      wallMs: 120_000,
      cpuMs: 120_000,
    });
    // A task limit shorter than the floor: the backstop's share wins (the run must be decided before it).
    expect(hangBounds(fast, 15_000, policy)).toEqual({ wallMs: 10_000, cpuMs: 10_000 });
    expect(
      hangBounds({ wallMs: 0, cpuMs: 0 }, BACKSTOP, { factor: 3, floorMs: 0, backstopShare: 1 }),
    ).toEqual({
      wallMs: 0,
      cpuMs: 0,
    });
  });

  it('the hang policy is part of the limits, hence of the evaluation fingerprint', () => {
    expect(DEFAULT_LIMITS.hang).toEqual({ factor: 3, floorMs: 30_000, backstopShare: 2 / 3 });
    expect(limitsFor(60_000).hang).toEqual(DEFAULT_LIMITS.hang);
  });

  it.each([
    ['policy.factor', { reference: fast, backstop: BACKSTOP, policy: { ...policy, factor: 0 } }],
    ['policy.floorMs', { reference: fast, backstop: BACKSTOP, policy: { ...policy, floorMs: -1 } }],
    [
      'policy.backstopShare',
      { reference: fast, backstop: BACKSTOP, policy: { ...policy, backstopShare: 1.5 } },
    ],
    [
      'policy.backstopShare',
      { reference: fast, backstop: BACKSTOP, policy: { ...policy, backstopShare: 0 } },
    ],
    ['backstopMs', { reference: fast, backstop: 0, policy }],
    ['reference.wallMs', { reference: { wallMs: Number.NaN, cpuMs: 1 }, backstop: BACKSTOP, policy }],
    ['reference.cpuMs', { reference: { wallMs: 1, cpuMs: -5 }, backstop: BACKSTOP, policy }],
  ])('refuses a bad %s', (field, c) => {
    expect(() => hangBounds(c.reference, c.backstop, c.policy)).toThrow(
      new RegExp(field.replace('.', '\\.')),
    );
  });
});

describe('the verdict', () => {
  it('a sleeping run on an idle host is the candidate’s timeout once the bound has passed', () => {
    const before = judgeOverrun(
      input({ wallMs: 29_900, cpuMs: 300, waited: { ms: 50, source: 'cgroup-psi' } }),
    );
    expect(before.verdict).toBe('starved');
    const at = judgeOverrun(input({ wallMs: 30_100, cpuMs: 300, waited: { ms: 50, source: 'cgroup-psi' } }));
    expect(at).toMatchObject({ verdict: 'timeout', boundMs: 30_000, offeredMs: 30_050 });
    expect(at.why).toMatch(/did not finish in 30\.1 s with a CPU on offer .*3 × the reference's 2\.0 s wall/);
    expect(at.why).toMatch(/cgroup-psi/);
  });

  it('a run the host kept waiting is owed the time it waited: starved at the backstop', () => {
    const v = judgeOverrun(
      input({ wallMs: BACKSTOP, cpuMs: 9_000, waited: { ms: 160_000, source: 'cgroup-psi' } }),
    );
    expect(v).toMatchObject({ verdict: 'starved', offeredMs: 20_000 });
    expect(v.why).toMatch(/kept the run from a CPU.*waited 160\.0 s.*only 20\.0 s of the 30\.0 s/);
  });

  it('a partly loaded host delays the verdict by the time waited, never more', () => {
    const waited = { ms: 20_000, source: 'host-psi' as const };
    expect(judgeOverrun(input({ wallMs: 49_000, waited })).verdict).toBe('starved');
    expect(judgeOverrun(input({ wallMs: 50_000, waited })).verdict).toBe('timeout');
  });

  it('a busy run is the candidate’s timeout once it received the CPU bound, however long it waited', () => {
    for (const waited of [null, { ms: BACKSTOP, source: 'host-idle' as const }]) {
      const v = judgeOverrun(input({ wallMs: 90_000, cpuMs: 30_000, waited }));
      expect(v.verdict).toBe('timeout');
      expect(v.why).toMatch(/received 30\.0 s of CPU without finishing \(bound 30\.0 s/);
    }
    expect(judgeOverrun(input({ wallMs: 90_000, cpuMs: 29_999, waited: null })).verdict).toBe('starved');
  });

  it('nothing telling how long the run waited gives the host the benefit of the doubt', () => {
    const v = judgeOverrun(input({ wallMs: BACKSTOP, cpuMs: 10, waited: null }));
    expect(v).toMatchObject({ verdict: 'starved', offeredMs: 0 });
    expect(v.why).toMatch(/nothing on this host tells/);
  });

  it('a wait read larger than the wall time (an upper bound over a wider window) counts as all of it', () => {
    const v = judgeOverrun(input({ wallMs: 40_000, waited: { ms: 55_000, source: 'host-psi' } }));
    expect(v).toMatchObject({ verdict: 'starved', offeredMs: 0 });
  });

  it('a slow reference moves the bound: 3 × its time', () => {
    const reference = { wallMs: 25_000, cpuMs: 20_000 };
    expect(judgeOverrun(input({ reference, wallMs: 74_000 })).verdict).toBe('starved');
    expect(judgeOverrun(input({ reference, wallMs: 75_000 })).verdict).toBe('timeout');
  });

  it.each([
    ['wallMs', { wallMs: -1 }],
    ['cpuMs', { cpuMs: Number.POSITIVE_INFINITY }],
    ['waited.ms', { waited: { ms: Number.NaN, source: 'host-psi' as const } }],
  ])('refuses a bad %s', (field, over) => {
    expect(() => judgeOverrun(input(over))).toThrow(new RegExp(`overrun: ${field.replace('.', '\\.')}`));
  });

  // Every combination of wall time, CPU time and wait reading against an oracle written from the rule's
  // statement, plus the two monotonicities the rule must keep.
  const walls = [0, 10_000, 29_999, 30_000, 45_000, 60_000, 120_000, BACKSTOP];
  const cpus = [0, 5_000, 29_999, 30_000, 90_000];
  const sources: WaitSource[] = ['cgroup-psi', 'host-psi', 'host-idle'];
  const waits: (CpuWait | null)[] = [
    null,
    ...[0, 1_000, 15_000, 30_000, 90_000, 200_000].flatMap((ms) => sources.map((source) => ({ ms, source }))),
  ];
  const oracle = (wall: number, cpu: number, waited: CpuWait | null) =>
    cpu >= 30_000 || (waited !== null && wall - Math.min(waited.ms, wall) >= 30_000) ? 'timeout' : 'starved';

  it('agrees with the rule on every combination', () => {
    let n = 0;
    for (const wallMs of walls)
      for (const cpuMs of cpus)
        for (const waited of waits) {
          const v = judgeOverrun(input({ wallMs, cpuMs, waited }));
          expect(v.verdict, JSON.stringify({ wallMs, cpuMs, waited })).toBe(oracle(wallMs, cpuMs, waited));
          expect(v.offeredMs).toBeLessThanOrEqual(wallMs);
          n++;
        }
    expect(n).toBe(walls.length * cpus.length * waits.length);
  });

  it('more waiting never makes a timeout; more wall or CPU time never undoes one', () => {
    const rank = { starved: 0, timeout: 1 };
    for (const cpuMs of cpus)
      for (let w = 1; w < walls.length; w++)
        for (const ms of [0, 15_000, 90_000]) {
          const at = (wallMs: number, c: number, wait: number) =>
            rank[judgeOverrun(input({ wallMs, cpuMs: c, waited: { ms: wait, source: 'host-psi' } })).verdict];
          expect(at(walls[w]!, cpuMs, ms)).toBeGreaterThanOrEqual(at(walls[w - 1]!, cpuMs, ms));
          expect(at(walls[w]!, cpuMs, ms + 10_000)).toBeLessThanOrEqual(at(walls[w]!, cpuMs, ms));
          expect(at(walls[w]!, cpuMs + 10_000, ms)).toBeGreaterThanOrEqual(at(walls[w]!, cpuMs, ms));
        }
  });
});

describe('reading the CPU wait', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vtnode-overrun-test-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('parses the "some" total of a PSI file, and nothing else', () => {
    const text =
      'some avg10=33.47 avg60=30.55 avg300=13.69 total=54617750\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n';
    expect(parsePressureSome(text)).toBe(54_617_750);
    expect(parsePressureSome('full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n')).toBeNull();
    expect(parsePressureSome('')).toBeNull();
  });

  it('bounds the wait by the idle CPUs: a run waits only while none is idle', () => {
    expect(waitFromIdle(10_000, 0, 2)).toBe(10_000);
    expect(waitFromIdle(10_000, 8_000, 2)).toBe(6_000);
    expect(waitFromIdle(10_000, 20_000, 2)).toBe(0);
    expect(waitFromIdle(10_000, 30_000, 2)).toBe(0);
    expect(waitFromIdle(10_000, 0, 0)).toBe(10_000);
  });

  it("the host's PSI since the run began, else its idle time", async () => {
    const psi = join(dir, 'cpu');
    await writeFile(psi, 'some avg10=1.00 avg60=1.00 avg300=1.00 total=1000000\nfull total=0\n');
    const watch = hostCpuWait(psi);
    await writeFile(psi, 'some avg10=1.00 avg60=1.00 avg300=1.00 total=3500000\nfull total=0\n');
    expect(await watch.cpuWait?.()).toEqual({ ms: 2_500, source: 'host-psi' });
    const idle = await hostCpuWait(join(dir, 'absent')).cpuWait?.();
    expect(idle?.source).toBe('host-idle');
    expect(idle?.ms).toBeGreaterThanOrEqual(0);
  });

  it('this host: /proc/pressure/cpu reads (PSI on) or the idle fallback answers', async () => {
    const w = await hostCpuWait().cpuWait?.();
    expect(['host-psi', 'host-idle']).toContain(w?.source);
  });
});
