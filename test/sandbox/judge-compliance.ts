// One compliance suite for every judge (runner adapter), the way libp2p's interface-compliance-tests
// give every transport the same suite: `judgeCompliance(name, { setup, teardown })` defines it for one
// judge and its fixture workspace (test/fixtures/judges/<name>), whose files all hold the same scenarios.
// Everything runs for real: the scorer, the bwrap sandbox, the runner installed in the fixture.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MineResult, mine } from '../../node/tasks/mine.ts';
import type { Task, TestRunner } from '../../protocol/task.ts';
import { judgeFor } from '../../sandbox/judges/index.ts';
import type { CaseStatus, TestCase } from '../../sandbox/judges/verdict.ts';
import type { ScoreResult, Scorer } from '../../sandbox/scorer.ts';
import { makeTask } from './fixtures.ts';

/** Setup and teardown of one suite run (libp2p's `TestSetup`). */
export interface TestSetup<T> {
  setup(): Promise<T>;
  teardown(): Promise<void>;
}

/** What the compliance suite needs from one judge and its fixture workspace. */
export interface JudgeFixture {
  /** The runner under test. */
  runner: TestRunner;
  /** Absolute path of the fixture workspace (its dependencies installed). */
  workspace: string;
  /** A checked scorer (bwrap), shared by every fixture. */
  scorer: Scorer;
  /** Workspace-relative files of the fixture. */
  files: {
    /** The source the fixture's miner-visible test exercises (src/calc.*). */
    source: string;
    /** The scenarios every fixture shares (test/scenarios.test.*). */
    scenarios: string;
    /** A test file that throws while it loads (test/load-fails.test.*). */
    loadFails: string;
    /** The passing test of `source` (test/calc.test.*). */
    sourceTest: string;
  };
  /** Status of `basics > is todo` (mocha cannot tell a placeholder from a skip). */
  todoStatus: CaseStatus;
  /** Status of the tests a failing before-all hook guards (vitest skips them, the others fail them). */
  hookGuardedStatus: CaseStatus;
  /** mocha loads every file before running any test: a file that fails to load leaves no case at all. */
  loadFailureAbortsRun: boolean;
  /** Whether the miner makes tests tasks for this runner (they need a batched mutation run). */
  testsTasks: boolean;
}

/** The cases of the scenarios file, with multiplicity, for a runner's quirks. */
export function expectedScenarioCases(f: Pick<JudgeFixture, 'todoStatus' | 'hookGuardedStatus'>): string[] {
  const cases: [string, CaseStatus][] = [
    ['basics > passes', 'passed'],
    ['basics > fails', 'failed'],
    ['basics > is skipped', 'skipped'],
    ['basics > is todo', f.todoStatus],
    ['outer > inner > is nested', 'passed'],
    ['each > doubles 1', 'passed'],
    ['each > doubles 2', 'passed'],
    ['each > doubles 3', 'passed'],
    ['twins > same name', 'passed'],
    ['twins > same name', 'passed'],
    ['hooked > guarded one', f.hookGuardedStatus],
    ['hooked > guarded two', f.hookGuardedStatus],
    ['async > awaits', 'passed'],
    ['throws > throws a string', 'failed'],
    ['ünïcødé ✓ > 名前 🙂', 'passed'],
  ];
  return cases.map(([name, status]) => `${name} :: ${status}`).sort();
}

/** Cases as sorted `name :: status` lines (file checked separately), multiplicity kept. */
const lines = (cases: TestCase[]) => cases.map((c) => `${c.name} :: ${c.status}`).sort();

/** A report in the runner's format claiming every scenario passed; `__FILE__` is the scenarios file. */
export function fakeReport(runner: TestRunner, names: string[]): string {
  const file = '__FILE__';
  if (runner === 'vitest' || runner === 'jest')
    return JSON.stringify({
      numTotalTests: names.length,
      numFailedTestSuites: 0,
      success: true,
      testResults: [
        {
          name: file,
          status: 'passed',
          message: '',
          assertionResults: names.map((n) => {
            const parts = n.split(' > ');
            return {
              ancestorTitles: parts.slice(0, -1),
              title: parts.at(-1),
              status: 'passed',
              failureMessages: [],
            };
          }),
        },
      ],
    });
  const cases = names.map((name) => ({ file, name, status: 'passed' }));
  if (runner === 'node:test') return JSON.stringify({ format: 'vtnode-node-test/1', cases, errors: [] });
  return JSON.stringify({ format: 'vtnode-mocha/1', started: true, complete: true, cases, errors: [] });
}

/** Statements valid in TS, JS, ESM and CJS alike that reach node's fs from a test file. */
const FS = `const __p = globalThis.process;
const __fs = typeof __p.getBuiltinModule === 'function' ? __p.getBuiltinModule('node:fs') : require('node:fs');`;

/** The case a forging tail appends, naming how many report paths it wrote (proof that it forged). */
export const FORGED = 'forged the report at';

/**
 * A hostile tail for a test file: finds the report path in every process's argv, writes `fake` there
 * at once, on a timer, and from an exit listener (after the runner's own write, if it could), leaves an
 * interval running, and appends a test case named after the number of paths it found, with the file's
 * own `it`.
 */
export function forgeReportTail(fake: string, scenariosRel: string): string {
  return `
;(() => {
${FS}
const __fake = ${JSON.stringify(fake)}.split('__FILE__').join(__p.cwd() + '/' + ${JSON.stringify(scenariosRel)});
const __found = new Set();
for (const pid of __fs.readdirSync('/proc')) {
  if (!/^[0-9]+$/.test(pid)) continue;
  let argv = [];
  try { argv = __fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').split('\\0'); } catch {}
  for (const a of argv) { const m = /(\\/[^\\s=,]*\\/\\.vtnode\\/report-[0-9a-f]+\\.json)/.exec(a); if (m) __found.add(m[1]); }
  // A report pipe: the main's end, through its /proc entry (the main is non-dumpable: refused).
  for (const a of argv) { const m = /\\/proc\\/self\\/fd\\/([0-9]+)/.exec(a); if (m) __found.add('/proc/' + pid + '/fd/' + m[1]); }
}
const __write = () => { let n = 0; for (const f of __found) { try { __fs.writeFileSync(f, __fake); n++; } catch {} } return n; };
const __wrote = __write();
setTimeout(__write, 1);
__p.on('exit', __write);
// A handle left open: the run must still end (it is not a reason to wait for the wall limit).
setInterval(() => {}, 60000);
it(${JSON.stringify(FORGED)} + ' ' + __wrote + ' path(s)', () => {});
})();
`;
}

/**
 * A hostile tail that leaves no report: it closes the report folder (removes what is there, no write
 * access), or, for a judge whose report leaves through the report pipe, kills the runner's main process
 * (the parent of the test process) before it writes one.
 */
export function removeReportDirTail(pipe: boolean): string {
  if (pipe)
    return `
;(() => {
${FS}
__p.kill(__p.ppid, 'SIGKILL');
})();
`;
  return `
;(() => {
${FS}
const __dir = __p.cwd() + '/.vtnode';
// The harness's own files there are bound read-only (they cannot be removed): the folder is closed instead.
for (const f of __fs.readdirSync(__dir)) if (f.startsWith('report-')) __fs.rmSync(__dir + '/' + f, { force: true });
__fs.chmodSync(__dir, 0o555);
})();
`;
}

/** Defines the compliance suite for one judge. */
export function judgeCompliance(name: string, common: TestSetup<JudgeFixture>): void {
  describe(`judge compliance: ${name}`, () => {
    let fx: JudgeFixture;
    let scenarios: Task;
    let scenariosText: string;
    let first: Promise<ScoreResult>;
    let mined: Promise<MineResult>;
    const score = (task: Task, candidate: string) =>
      fx.scorer.score({ task, workspaceDir: fx.workspace, candidate });

    beforeAll(async () => {
      fx = await common.setup();
      // The scenarios file is its own target: a `file` task whose candidate is the scenarios' text.
      scenarios = await makeTask({
        id: `${name}/scenarios`,
        workspace: fx.workspace,
        target: fx.files.scenarios,
        runner: fx.runner,
        testFiles: [fx.files.scenarios],
        timeoutMs: 120_000,
      });
      scenariosText = await readFile(join(fx.workspace, fx.files.scenarios), 'utf8');
      first = score(scenarios, scenariosText);
      first.catch(() => {});
      mined = mine({ root: fx.workspace });
      mined.catch(() => {});
    }, 120_000);
    afterAll(() => common.teardown());

    it('parses exactly the expected cases (file, full name, status, multiplicity); the exit code agrees', async () => {
      const r = await first;
      expect(lines(r.tests)).toEqual(expectedScenarioCases(fx));
      expect(new Set(r.tests.map((c) => c.file))).toEqual(new Set([fx.files.scenarios]));
      expect(r.run?.exitCode).not.toBe(0);
      expect(r.reasons.join('; ')).not.toMatch(/exited|did not exit normally|inconsistent|malformed/);
      expect(r.tests.find((c) => c.name === 'throws > throws a string')?.message).toContain('a plain string');
      expect(r.reward).toBeGreaterThan(0);
      expect(r.reward).toBeLessThan(1);
    }, 240_000);

    it('gives the same inventory on a second run, whatever report a test forges or handle it leaves open', async () => {
      const before = await first;
      const names = expectedScenarioCases(fx).map((l) => l.split(' :: ')[0]!);
      const tail = forgeReportTail(fakeReport(fx.runner, names), fx.files.scenarios);
      // A report file is written (and read back by nobody); the report pipe is out of the test's reach.
      const wrote = judgeFor(fx.runner).reportPipe ? 0 : 1;
      const r = await score(scenarios, `${scenariosText}${tail}`);
      expect(r.run?.timedOut).toBe(false);
      const forged = r.tests.filter((c) => c.name.startsWith(FORGED));
      expect(forged.map((c) => `${c.name} :: ${c.status}`)).toEqual([`${FORGED} ${wrote} path(s) :: passed`]);
      expect(lines(r.tests.filter((c) => !forged.includes(c)))).toEqual(lines(before.tests));
      expect(r.failed).toBe(before.failed);
      const reasons = r.reasons.join('; ');
      expect(reasons).not.toMatch(/missing|ran in the reference|exited|malformed/);
      expect(reasons).toContain(
        `1 test(s) not in the reference: ${fx.files.scenarios} :: ${FORGED} ${wrote} path(s)`,
      );
      expect(r.reward).toBe(0);
    }, 240_000);

    it('refuses a run that leaves no report (VerdictError), never a reward', async () => {
      const r = await score(
        scenarios,
        `${scenariosText}${removeReportDirTail(judgeFor(fx.runner).reportPipe)}`,
      );
      expect(r.reward).toBe(0);
      expect(r.tests).toEqual([]);
      expect(r.reasons.join('; ')).toMatch(/wrote no report|cannot open the report|not a regular file/);
      expect(r.status).toBe('scored');
    }, 240_000);

    it('reports a test file that fails to load as an error outside any case', async () => {
      const task = await makeTask({
        id: `${name}/load-fails`,
        workspace: fx.workspace,
        target: fx.files.loadFails,
        runner: fx.runner,
        testFiles: [fx.files.loadFails, fx.files.sourceTest],
        timeoutMs: 120_000,
      });
      const r = await score(task, await readFile(join(fx.workspace, fx.files.loadFails), 'utf8'));
      expect(r.reward).toBe(0);
      expect(r.run?.exitCode).not.toBe(0);
      expect(r.reasons.join('; ')).toMatch(/error\(s\) outside any test case/);
      expect(r.reasons.join('; ')).not.toMatch(/exited|did not exit normally/);
      if (fx.loadFailureAbortsRun) expect(r.tests).toEqual([]);
      else {
        expect(r.diagnostics).toContain(`${fx.files.loadFails}: `);
        expect(r.diagnostics).toContain('fails to load on purpose');
        expect(r.tests.length).toBeGreaterThan(0);
        expect(r.tests.every((c) => c.file === fx.files.sourceTest && c.status === 'passed')).toBe(true);
      }
    }, 240_000);

    it('mines the fixture, and every mined reference scores 1.0 (file and tests tasks)', async () => {
      const { tasks, summary } = await mined;
      expect(summary.runner).toBe(fx.runner);
      expect(tasks.map((t) => `${t.kind}:${t.target}`).sort()).toEqual([
        `file:${fx.files.source}`,
        ...(fx.testsTasks ? [`tests:${fx.files.sourceTest}`] : []),
      ]);
      if (!fx.testsTasks) expect(summary.skipped.map((s) => s.path)).toContain(fx.files.sourceTest);
      for (const task of tasks) {
        const reference = await readFile(join(fx.workspace, task.target), 'utf8');
        const r = await score(task, reference);
        expect({ task: task.id, reward: r.reward, reasons: r.reasons }).toEqual({
          task: task.id,
          reward: 1,
          reasons: [],
        });
      }
    }, 400_000);

    it('scores a wrong candidate below the reference', async () => {
      const { tasks } = await mined;
      const task = tasks.find((t) => t.kind === 'file')!;
      const reference = await readFile(join(fx.workspace, task.target), 'utf8');
      const wrong = reference.replace('return a + b;', 'return a - b;');
      expect(wrong).not.toBe(reference);
      const r = await score(task, wrong);
      expect(r.failed).toBeGreaterThan(0);
      expect(r.reward).toBeLessThan(1);
    }, 240_000);
  });
}
