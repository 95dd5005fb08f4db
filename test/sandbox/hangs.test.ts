// Candidates that never settle: a run that outlives its reference's yardstick while the host had CPU to
// give it is the candidate's timeout (reward 0, status `timeout`), decided by the hang rule
// (sandbox/overrun.ts) long before the wall-clock backstop; only a host that kept the run from the CPU
// (simulated here by an injected CPU-wait reading) makes it an infrastructure error.
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import type { Task } from '../../protocol/task.ts';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import { type RunMonitor, runGroup } from '../../sandbox/group-run.ts';
import { DEFAULT_HANG_POLICY } from '../../sandbox/overrun.ts';
import { listProcesses } from '../../sandbox/procfs.ts';
import { createCheckedScorer, createScorer, type ScoreResult, type Scorer } from '../../sandbox/scorer.ts';
import { makeTask, NODE_WS, prepareFixtures, VITEST_WS } from './fixtures.ts';

/**
 * A small task limit keeps the test quick: backstop 3 × 15 s; the default hang policy but for its share
 * of the backstop (a third: at most 15 s), so that a host loaded by other work still leaves the run
 * the time it is owed before the backstop (the real limits, 40 s and more, leave much more room).
 */
const TASK_MS = 15_000;
const HANG = { ...DEFAULT_HANG_POLICY, backstopShare: 1 / 3 };
const TEST_MS = 120_000;
const workspaceId = async (d: string) => (await workspaceIdentity(d)).id;

/** A reading of a host that kept the run waiting for a CPU all along (what a starved run sees). */
function starvedHost(): RunMonitor {
  const at = performance.now();
  return { cpuWait: async () => ({ ms: performance.now() - at, source: 'host-psi' }) };
}

/** A reading of a host that never kept the run waiting (what a run on an idle host sees). */
function idleHost(): RunMonitor {
  return { cpuWait: async () => ({ ms: 0, source: 'cgroup-psi' }) };
}

/** The processes of a run started by runGroup (its process group). */
const groupMembers = async (child: ChildProcess) =>
  (await listProcesses()).filter((p) => p.pgid === child.pid);

describe('runGroup: the hang rule', () => {
  const base = { env: { PATH: '/usr/bin:/bin' }, cwd: '/', cpuMs: 10_000, outputBytes: 1024 * 1024 };
  const hang = { reference: { wallMs: 100, cpuMs: 50 }, policy: { ...DEFAULT_HANG_POLICY, floorMs: 1_000 } };
  const idle = idleHost();

  it('a sleeping run on a host with CPU to give is stopped as the candidate’s timeout, before the backstop', async () => {
    const r = await runGroup({
      ...base,
      argv: ['/bin/sleep', '600'],
      wallMs: 60_000,
      hang,
      monitors: [idle],
    });
    expect(r.timedOut).toBe(true);
    expect(r.overrun?.verdict).toBe('timeout');
    expect(r.overrun?.offeredMs).toBeGreaterThanOrEqual(r.overrun!.boundMs);
    expect(r.overrun?.boundMs).toBe(1_000);
    expect(r.usage.wallMs).toBeLessThan(60_000);
  });

  it('a run the host kept from the CPU reaches the backstop and is starved', async () => {
    const r = await runGroup({
      ...base,
      argv: ['/bin/sleep', '600'],
      wallMs: 3_000,
      hang,
      monitors: [starvedHost()],
    });
    expect(r.timedOut).toBe(true);
    expect(r.overrun?.verdict).toBe('starved');
    expect(r.overrun?.why).toMatch(/kept the run from a CPU/);
  });

  it('a busy run is the candidate’s once it received the CPU bound, even on a host that looks starved', async () => {
    const r = await runGroup({
      ...base,
      argv: ['/bin/sh', '-c', 'while :; do :; done'],
      wallMs: 20_000,
      hang,
      members: groupMembers,
      monitors: [starvedHost()],
    });
    expect(r.cpuExceeded).toBe(false);
    expect(r.overrun?.verdict).toBe('timeout');
    expect(r.overrun?.why).toMatch(/received .* of CPU without finishing/);
  }, 40_000);

  it('without a reference the backstop is not judged (the reference’s own run)', async () => {
    const r = await runGroup({ ...base, argv: ['/bin/sleep', '600'], wallMs: 1_500, monitors: [idle] });
    expect(r.timedOut).toBe(true);
    expect(r.overrun).toBeNull();
  });
});

describe('scored candidates that never settle (bubblewrap)', () => {
  let scorer: Scorer;
  let starvedScorer: Scorer;
  let idleScorer: Scorer;
  let strings: Task;
  let stringsTests: Task;
  let math: Task;
  let reference: string;

  beforeAll(async () => {
    await prepareFixtures();
    const limits = { hang: HANG };
    scorer = await createCheckedScorer({ workspaceId, limits });
    const injected = async (cpuWait: () => RunMonitor) =>
      createScorer({
        confinement: await createBwrapConfinement({ cpuWait }),
        workspaceId,
        limits,
        infraRetries: 0,
      });
    starvedScorer = await injected(starvedHost);
    idleScorer = await injected(idleHost);
    const common = { workspace: VITEST_WS, runner: 'vitest' as const, timeoutMs: TASK_MS };
    strings = await makeTask({
      ...common,
      id: 'hang/strings',
      target: 'src/strings.ts',
      testFiles: ['test/strings.test.ts'],
    });
    stringsTests = await makeTask({
      ...common,
      id: 'hang/strings-tests',
      kind: 'tests',
      target: 'test/strings.test.ts',
      testFiles: ['test/strings.test.ts', 'test/stack.test.ts'],
    });
    math = await makeTask({
      id: 'hang/math',
      workspace: NODE_WS,
      target: 'src/math.js',
      runner: 'node:test',
      testFiles: ['test/math.test.js'],
      timeoutMs: TASK_MS,
    });
    reference = await readFile(join(VITEST_WS, 'src/strings.ts'), 'utf8');
  }, TEST_MS);
  afterAll(async () => {
    await scorer?.close();
    await starvedScorer?.close();
    await idleScorer?.close();
  });

  const score = (s: Scorer, task: Task, candidate: string) =>
    s.score({ task, workspaceDir: task.workspace.root!, candidate });

  /** The candidate's timeout: scored, reward 0, the reason says so and the run was stopped by the rule. */
  function timeout(r: ScoreResult): void {
    expect(r.status, `${r.error ?? ''}\n${r.reasons.join('\n')}`).toBe('timeout');
    expect(r.reward).toBe(0);
    expect(r.reasons[0]).toMatch(/^timeout: the run (did not finish in .* with a CPU on offer|received)/);
    expect(r.run?.overrun?.verdict).toBe('timeout');
    // Decided by the rule within its bound (3 × the reference, capped below the backstop), not by the backstop.
    expect(r.run?.overrun?.boundMs).toBeLessThanOrEqual(TASK_MS);
    expect(r.run?.overrun?.offeredMs).toBeGreaterThanOrEqual(r.run!.overrun!.boundMs);
  }

  it(
    'controls: the references and an honest candidate that awaits a timer at load keep 1',
    async () => {
      expect((await score(scorer, strings, reference)).reward).toBe(1);
      expect((await score(scorer, math, await readFile(join(NODE_WS, 'src/math.js'), 'utf8'))).reward).toBe(
        1,
      );
      const slowStart = `await new Promise((r) => setTimeout(r, 300));\n${reference}`;
      const r = await score(scorer, strings, slowStart);
      expect(r.status).toBe('scored');
      expect(r.reward).toBe(1);
    },
    TEST_MS,
  );

  // Sleeping runs leave the CPU to each other: judged side by side, each still by its own cgroup's
  // CPU pressure (a start-up spent waiting for a CPU is not time on offer).
  describe.concurrent('that sleep', () => {
    it.each([
      ['top-level await on a promise that never resolves', 'await new Promise(() => {});'],
      [
        'top-level await on a setTimeout chain',
        'await new Promise(() => {\n  const tick = () => setTimeout(tick, 25);\n  tick();\n});',
      ],
      [
        'Atomics.wait at load (the thread sleeps, no timer can fire)',
        'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);',
      ],
    ])(
      '%s: timeout, reward 0',
      async (_name, prelude) => {
        timeout(await score(scorer, strings, `${prelude}\n${reference}`));
      },
      TEST_MS,
    );

    it(
      'a function that sleeps forever inside a test (Atomics.wait): timeout, reward 0',
      async () => {
        const sleeper = reference.replace(
          'return text\n',
          'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);\n  return text\n',
        );
        expect(sleeper).not.toBe(reference);
        timeout(await score(scorer, strings, sleeper));
      },
      TEST_MS,
    );

    it(
      'node:test: a function whose promise never settles while a timer keeps the process up',
      async () => {
        const math0 = await readFile(join(NODE_WS, 'src/math.js'), 'utf8');
        const keeper = `setInterval(() => {}, 1000);\nawait new Promise(() => {});\n${math0}`;
        timeout(await score(scorer, math, keeper));
      },
      TEST_MS,
    );

    it(
      'a tests candidate whose test awaits a promise that never resolves (no test timeout)',
      async () => {
        const original = await readFile(join(VITEST_WS, 'test/strings.test.ts'), 'utf8');
        const hung = `${original}\nit('waits', async () => {\n  await new Promise(() => {});\n}, 2_000_000_000);\n`;
        timeout(await score(scorer, stringsTests, hung));
      },
      TEST_MS,
    );
  });

  it(
    'a busy loop in a child process on a host with CPU to give: reward 0, never an infrastructure error',
    async () => {
      const busy =
        "const cp = process.getBuiltinModule('node:child_process');\n" +
        "cp.spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });\n" +
        'await new Promise(() => {});\n';
      // The CPU on offer is injected: on this shared host a busy loop really waits for a CPU.
      const r = await score(idleScorer, strings, `${busy}${reference}`);
      expect(r.status, r.error ?? '').not.toBe('error');
      expect(r.reward).toBe(0);
      expect(r.reasons.join('\n')).toMatch(/^timeout:|exhausted its CPU budget/m);
    },
    TEST_MS,
  );

  it(
    'the same sleeping candidate on a starved host stays an infrastructure error, never a 0',
    async () => {
      const r = await score(starvedScorer, strings, `await new Promise(() => {});\n${reference}`);
      expect(r.status).toBe('error');
      expect(r.reward).toBeNull();
      expect(r.error).toMatch(/starved of CPU: the host kept the run from a CPU/);
      expect(r.run?.overrun?.verdict).toBe('starved');
    },
    TEST_MS,
  );
});
