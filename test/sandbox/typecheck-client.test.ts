// The type-check service's life as its client sees it: lazy start, reuse, queueing, restart after a
// death, CPU budget and wall backstop (`timeout`, never `failed`), refusals (`error`), abort, close.
// The service runs confined (bwrap) on the small vitest-ts fixture.
import { beforeAll, describe, expect, it } from 'vitest';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import type { Confinement, SpawnExit, SpawnedProcess } from '../../sandbox/confinement.ts';
import { createTypecheckService, type TypecheckServiceOptions } from '../../sandbox/typecheck/client.ts';
import { createTypecheckRegistry, tscArgsOf } from '../../sandbox/typecheck/registry.ts';
import { prepareFixtures, VITEST_WS } from './fixtures.ts';
import { original } from './typecheck-helpers.ts';

const ARGS = ['--noEmit', '-p', 'tsconfig.json'];
const TARGET = 'src/strings.ts';
let bwrap: Confinement;
let strings: string;
/** A candidate that costs the checker well over a second of CPU (50,000 declarations). */
const heavy = Array.from({ length: 50_000 }, (_, i) => `export const v${i}: number = ${i} * 2;`).join('\n');

/** The real backend, recording every process it spawns. */
function recording(): { confinement: Confinement; spawned: SpawnedProcess[] } {
  const spawned: SpawnedProcess[] = [];
  const confinement: Confinement = {
    ...bwrap,
    async spawn(spec) {
      const p = await bwrap.spawn(spec);
      spawned.push(p);
      return p;
    },
  };
  return { confinement, spawned };
}

function service(extra: Partial<TypecheckServiceOptions> = {}) {
  const rec = recording();
  const svc = createTypecheckService({
    confinement: rec.confinement,
    workspaceDir: VITEST_WS,
    tscArgs: ARGS,
    ...extra,
  });
  return { svc, spawned: rec.spawned };
}

/** Resolves once the process has used `ms` more CPU than now (a check is running in it). */
async function busy(p: SpawnedProcess, ms = 100): Promise<void> {
  const start = (await p.usage()).cpuMs;
  while ((await p.usage()).cpuMs - start < ms) await new Promise((r) => setTimeout(r, 20));
}

async function allExited(spawned: SpawnedProcess[]): Promise<SpawnExit[]> {
  return Promise.all(spawned.map((p) => p.exited));
}

beforeAll(async () => {
  await prepareFixtures();
  bwrap = await createBwrapConfinement();
  strings = await original(VITEST_WS, TARGET);
});

describe('the type-check service client', () => {
  it('starts at the first check, reuses the process, answers queued checks in order', async () => {
    const { svc, spawned } = service();
    expect(spawned).toHaveLength(0);
    const [good, bad, again] = await Promise.all([
      svc.check({ [TARGET]: `${strings}\n// a comment\n` }, { target: TARGET }),
      svc.check({ [TARGET]: `${strings}\nexport const n: number = 'x';\n` }),
      svc.check({}),
    ]);
    expect(good).toMatchObject({ status: 'passed', error: null, typescript: '5.9.3', scope: 'affected' });
    expect(good.api?.exports.map((e) => e.name)).toEqual(['capitalize', 'slugify', 'wordCounts']);
    expect(bad).toMatchObject({ status: 'failed', diagnosticCount: 1, api: null });
    expect(bad.diagnostics[0]).toMatchObject({ file: TARGET, code: 2322, category: 'error' });
    expect(again.status).toBe('passed');
    expect(spawned).toHaveLength(1);
    await svc.close();
    expect((await allExited(spawned)).map((e) => e.survivors)).toEqual([0]);
  }, 120_000);

  it('restarts a service that died, and reports the check it was running as an error', async () => {
    const { svc, spawned } = service();
    expect((await svc.check({})).status).toBe('passed');
    spawned[0]!.kill();
    await spawned[0]!.exited;
    expect((await svc.check({ [TARGET]: strings })).status).toBe('passed');
    expect(spawned).toHaveLength(2);
    const during = svc.check({ [TARGET]: heavy });
    await busy(spawned[1]!);
    spawned[1]!.kill();
    const r = await during;
    expect(r.status).toBe('error');
    expect(r.error).toMatch(/killed by SIGKILL|exited/);
    await svc.close();
  }, 180_000);

  it('answers timeout (never failed) past the CPU budget, then restarts', async () => {
    // 400 ms: an ordinary check fits (one took more than 150 ms in a quiet CI run), `heavy` never does.
    const { svc, spawned } = service({ checkCpuMs: 400, pollMs: 20 });
    expect((await svc.check({})).status).toBe('passed');
    const r = await svc.check({ [TARGET]: heavy }, { target: TARGET });
    expect(r.status).toBe('timeout');
    expect(r.error).toMatch(/more than 400 ms of CPU/);
    expect(r.limit).toBe('cpu');
    expect(r.cpuMs).toBeGreaterThan(400);
    expect((await spawned[0]!.exited).killed).toBe(true);
    expect((await svc.check({})).status).toBe('passed');
    expect(spawned).toHaveLength(2);
    await svc.close();
  }, 180_000);

  it('answers timeout at the wall-clock backstop', async () => {
    // Backstop = budget × 0.0001 + 2 s: 100 s for the start, 2.1 s for a check (whose CPU budget,
    // 1000 s, is never reached). The first, ordinary check takes far less, also on a loaded machine (a
    // backstop of 0.4 s was once reached by it, beside another test lane); the second costs the checker
    // about 5 s of CPU here (five times as many declarations as `heavy`, within the
    // service's 8 MiB request).
    const { svc } = service({
      startCpuMs: 1e9,
      checkCpuMs: 1e6,
      wallFactor: 0.0001,
      wallFloorMs: 2_000,
      pollMs: 20,
    });
    expect((await svc.check({})).status).toBe('passed');
    const heavier = Array.from({ length: 250_000 }, (_, i) => `export const w${i}=${i};`).join('\n');
    const r = await svc.check({ [TARGET]: heavier });
    expect(r.status, r.error ?? '').toBe('timeout');
    expect(r.error).toMatch(/wall-clock/);
    expect(r.limit).toBe('wall');
    await svc.close();
  }, 180_000);

  it('answers timeout when the start exceeds its budget', async () => {
    const { svc, spawned } = service({ startCpuMs: 1, pollMs: 20 });
    const r = await svc.check({});
    expect(r.status).toBe('timeout');
    expect(r.error).toMatch(/start used more than 1 ms of CPU/);
    expect((await allExited(spawned)).every((e) => e.killed)).toBe(true);
    await svc.close();
  }, 120_000);

  it('refuses bad requests as errors naming the field, and keeps serving', async () => {
    const { svc, spawned } = service();
    const cases: [Record<string, string>, string | undefined, RegExp][] = [
      [{ '../outside.ts': '' }, undefined, /request\.overlay\["\.\.\/outside\.ts"\]: leaves the workspace/],
      [
        { '/etc/passwd.ts': '' },
        undefined,
        /request\.overlay\["\/etc\/passwd\.ts"\]: must be a relative POSIX path/,
      ],
      [{ 'src/new-file.ts': '' }, undefined, /no such file in the workspace/],
      [{ 'tsconfig.json': '{}' }, undefined, /not a TypeScript or JavaScript source file/],
      [{ 'package.json': '{}' }, undefined, /not a TypeScript or JavaScript source file/],
      [{}, '../x.ts', /request\.target: leaves the workspace/],
    ];
    for (const [overlay, target, re] of cases) {
      const r = await svc.check(overlay, target ? { target } : {});
      expect(r.status).toBe('error');
      expect(r.error).toMatch(re);
    }
    expect((await svc.check({})).status).toBe('passed');
    expect(spawned).toHaveLength(1);
    await svc.close();
  }, 120_000);

  it('answers error for a command it cannot serve', async () => {
    for (const [args, re] of [
      [['-p', 'tsconfig.json'], /only `tsc --noEmit` is served/],
      [['--noEmit', '-p', 'missing.json'], /does not exist/],
      [['--noEmit', '--bogusFlag'], /Unknown compiler option/],
      [['--noEmit', 'src/strings.ts'], /files on the command line/],
    ] as const) {
      const { svc } = service({ tscArgs: [...args] });
      const r = await svc.check({});
      expect(r.status).toBe('error');
      expect(r.error).toMatch(re);
      await svc.close();
    }
  }, 120_000);

  it('stops waiting on abort; the queue goes on and later checks get their own answers', async () => {
    const { svc, spawned } = service();
    expect((await svc.check({})).status).toBe('passed');
    const early = new AbortController();
    early.abort(new Error('gave up'));
    await expect(svc.check({}, { signal: early.signal })).rejects.toThrow('gave up');
    const ctl = new AbortController();
    const slow = svc.check({ [TARGET]: heavy }, { signal: ctl.signal });
    await busy(spawned[0]!);
    const next = svc.check({ [TARGET]: `${strings}\nexport const n: number = 'x';\n` });
    ctl.abort(new Error('stop'));
    await expect(slow).rejects.toThrow('stop');
    const r = await next;
    expect(r.status).toBe('failed');
    expect(r.diagnostics.map((d) => d.code)).toEqual([2322]);
    await svc.close();
  }, 180_000);

  it('answers error after close and leaves no process behind', async () => {
    const { svc, spawned } = service();
    expect((await svc.check({})).status).toBe('passed');
    await svc.close();
    expect((await svc.check({})).error).toMatch(/closed/);
    const exits = await allExited(spawned);
    expect(exits.map((e) => e.survivors)).toEqual([0]);
  }, 120_000);
});

describe('the type-check registry', () => {
  it('recognises the commands the service serves', () => {
    expect(tscArgsOf(['npx', 'tsc', '--noEmit', '-p', 'tsconfig.json'])).toEqual([
      '--noEmit',
      '-p',
      'tsconfig.json',
    ]);
    expect(tscArgsOf(['npx', '--no-install', 'tsc', '--noemit'])).toEqual(['--noemit']);
    expect(tscArgsOf(['tsc', '-p', '.', '--noEmit'])).toEqual(['-p', '.', '--noEmit']);
    expect(tscArgsOf(['node_modules/.bin/tsc', '--noEmit'])).toEqual(['--noEmit']);
    expect(tscArgsOf(['tsc', '-p', 'tsconfig.json'])).toBeNull();
    expect(tscArgsOf(['tsc', '-b', '--noEmit'])).toBeNull();
    expect(tscArgsOf(['tsc', '--noEmit', '--watch'])).toBeNull();
    expect(tscArgsOf(['vue-tsc', '--noEmit'])).toBeNull();
    expect(tscArgsOf(['npm', 'run', 'typecheck'])).toBeNull();
    expect(tscArgsOf([])).toBeNull();
  });

  it('shares one service per workspace content, tsconfig and TypeScript', async () => {
    const registry = createTypecheckRegistry({ confinement: bwrap });
    const argv = ['npx', 'tsc', '--noEmit', '-p', 'tsconfig.json'];
    const a = registry.serviceFor(VITEST_WS, argv, 'id-1');
    expect(a).not.toBeNull();
    expect(registry.serviceFor(VITEST_WS, argv, 'id-1')).toBe(a);
    expect(registry.serviceFor(VITEST_WS, ['tsc', '--noEmit', '-p', 'tsconfig.json'], 'id-1')).toBe(a);
    expect(registry.serviceFor(VITEST_WS, [...argv, '--strict'], 'id-1')).not.toBe(a);
    expect(registry.serviceFor(VITEST_WS, ['tsc', '-p', 'tsconfig.json'])).toBeNull();
    const b = registry.serviceFor(VITEST_WS, argv, 'id-2');
    expect(b).not.toBe(a);
    expect((await a!.check({})).error).toMatch(/closed/);
    await registry.close();
  });
});
