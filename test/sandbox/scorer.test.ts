import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import type { Task } from '../../protocol/task.ts';
import { createCheckedScorer, type Scorer } from '../../sandbox/scorer.ts';
import { runSelfTest } from '../../sandbox/self-test.ts';
import { createUnconfined } from '../../sandbox/unconfined.ts';
import { fixtureTasks, makeTask, prepareFixtures, REPO_ROOT, VITEST_WS } from './fixtures.ts';

const run = promisify(execFile);
const cli = (args: string[]) =>
  run(process.execPath, [join(REPO_ROOT, 'bin', 'vtnode.js'), ...args], { cwd: REPO_ROOT, timeout: 120_000 });

let dir: string;
let tasks: Record<string, Task>;
let tasksFile: string;
let scorer: Scorer;

beforeAll(async () => {
  await prepareFixtures();
  dir = await mkdtemp(join(tmpdir(), 'vtnode-scorer-test-'));
  tasks = await fixtureTasks();
  tasksFile = join(dir, 'tasks.jsonl');
  await writeFile(
    tasksFile,
    `${Object.values(tasks)
      .map((t) => JSON.stringify(t))
      .join('\n')}\n`,
  );
  scorer = await createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
}, 60_000);

afterAll(async () => {
  await scorer?.close();
  await rm(dir, { recursive: true, force: true });
});

const reference = async (t: Task) => readFile(join(t.workspace.root!, t.target), 'utf8');

describe('scorer (bwrap)', () => {
  it('type-checks the paired tests in a fresh box: a wrong signature the tests survive scores 0', async () => {
    const ref = await reference(tasks['strings']!);
    const candidate = ref
      .replace(
        'export function slugify(text: string): string {',
        'export function slugify(text: string, sep: string): string {',
      )
      .replace(".join('-');", '.join(sep ?? "-");');
    expect(candidate).not.toBe(ref);
    const r = await scorer.score({ task: tasks['strings']!, workspaceDir: VITEST_WS, candidate });
    expect(r.passed).toBe(6); // the tests pass at run time...
    expect(r.typecheck).toBe('failed'); // ...but tsc over the tests sees the new required parameter
    expect(r.reward).toBe(0);
    expect(r.diagnostics).toMatch(/TS2554/);
  }, 60_000);

  it('counts it.fails as passed and skips/todos as neither; lints multiply the reward down', async () => {
    const ref = await reference(tasks['strings']!);
    const candidate = ref.replace(
      'const counts = new Map<string, number>();',
      'const counts: any = new Map<string, number>();',
    );
    const r = await scorer.score({ task: tasks['strings']!, workspaceDir: VITEST_WS, candidate });
    expect(r).toMatchObject({ passed: 6, failed: 0, skipped: 1, todo: 1, typecheck: 'passed' });
    expect(r.lints).toEqual([{ name: 'any', added: 1 }]);
    expect(r.reward).toBe(0.9);
  }, 60_000);

  it('scores a tests task by the mutants its tests kill, not by how many tests it has', async () => {
    const t = tasks['stringsTests']!;
    const original = await reference(t);
    expect((await scorer.score({ task: t, workspaceDir: VITEST_WS, candidate: original })).reward).toBe(1);
    // Real tests of two of the three functions: some of the original's kills, never more than 1.
    const own = `import { expect, it } from 'vitest';\nimport { capitalize, slugify } from '../src/index.ts';\n\nit('slugs', () => {\n  expect(slugify('A b')).toBe('a-b');\n  expect(slugify(' x--y ')).toBe('x-y');\n});\nit('capitalizes', () => {\n  expect(capitalize('x')).toBe('X');\n  expect(capitalize('')).toBe('');\n});\n`;
    const good = await scorer.score({ task: t, workspaceDir: VITEST_WS, candidate: own });
    expect(good.reward, good.reasons.join('; ')).toBeGreaterThan(0.2);
    expect(good.reward).toBeLessThan(1);
    expect(good.reasons.join(' ')).toMatch(/the tests kill \d+ of the \d+ mutants the original tests kill/);
    // Tests that pass and assert nothing about the code: they kill nothing.
    const trivial = `import { expect, it } from 'vitest';\nimport { slugify } from '../src/index.ts';\n\nit('adds', () => expect(1 + 1).toBe(2));\nit('is a function', () => expect(typeof slugify).toBe('function'));\n`;
    const t0 = await scorer.score({ task: t, workspaceDir: VITEST_WS, candidate: trivial });
    expect(t0.reward).toBe(0);
    expect(t0.reasons.join(' ')).toMatch(/kill none|enter 0 of/);
    const none = await scorer.score({
      task: t,
      workspaceDir: VITEST_WS,
      candidate: "import { describe } from 'vitest';\ndescribe('nothing', () => {});\n",
    });
    expect(none.reward).toBe(0);
    const wrong = await scorer.score({
      task: t,
      workspaceDir: VITEST_WS,
      candidate: own.replace("toBe('X')", "toBe('Y')"),
    });
    expect(wrong.reward).toBe(0);
    expect(wrong.reasons).toContain("1 of the candidate's tests fail on the reference");
  }, 240_000);

  it('counts a mutant that breaks the test file at load as killed, not as a tamper', async () => {
    // A module-level table built by a function: some mutants throw while the module loads, so the copy's
    // sentinel never runs. That copy's mutant is killed; the original still earns 1.
    const ws = join(dir, 'load-kill');
    const files: Record<string, string> = {
      'package.json': JSON.stringify({ name: 'load-kill', private: true, type: 'module' }),
      'src/table.js':
        "function build(n) {\n  if (n < 0) throw new RangeError('negative size');\n  return Array.from({ length: n }, (_, i) => i * i);\n}\nexport const SQUARES = build(4);\nexport function square(i) {\n  return SQUARES[i];\n}\n",
      'test/table.test.js':
        "import assert from 'node:assert/strict';\nimport { test } from 'node:test';\nimport { SQUARES, square } from '../src/table.js';\n\ntest('squares', () => {\n  assert.deepEqual(SQUARES, [0, 1, 4, 9]);\n  assert.equal(square(3), 9);\n});\n",
    };
    for (const [path, text] of Object.entries(files)) {
      await (await import('node:fs/promises')).mkdir(join(ws, path, '..'), { recursive: true });
      await writeFile(join(ws, path), text);
    }
    const task = await makeTask({
      id: 'load-kill/tests',
      workspace: ws,
      kind: 'tests',
      target: 'test/table.test.js',
      runner: 'node:test',
      testFiles: ['test/table.test.js'],
    });
    task.judge.mutate = ['src/table.js'];
    const r = await scorer.score({ task, workspaceDir: ws, candidate: files['test/table.test.js']! });
    expect(r.reward, r.reasons.join('\n')).toBe(1);
  }, 240_000);

  it('stops at once when aborted', async () => {
    const controller = new AbortController();
    const t = tasks['math']!;
    await scorer.score({ task: t, workspaceDir: t.workspace.root!, candidate: await reference(t) });
    const started = Date.now();
    setTimeout(() => controller.abort(), 300);
    const r = await scorer.score({
      task: t,
      workspaceDir: t.workspace.root!,
      candidate: `${await reference(t)}\nwhile (true) {}\n`,
      signal: controller.signal,
    });
    // An aborted run says nothing about the candidate: not scored, never a 0.
    expect(r).toMatchObject({ status: 'error', reward: null, error: 'the run was aborted' });
    expect(Date.now() - started).toBeLessThan(5000);
  }, 30_000);

  it('does not keep a reference run that was aborted', async () => {
    const t = { ...tasks['math']!, id: 'node-basic/math-abort' };
    const controller = new AbortController();
    controller.abort();
    const aborted = await scorer.score({
      task: t,
      workspaceDir: t.workspace.root!,
      candidate: await reference(t),
      signal: controller.signal,
    });
    expect(aborted).toMatchObject({ status: 'error', reward: null });
    expect(aborted.error).toMatch(/the reference could not be run: the run was aborted/);
    const again = await scorer.score({
      task: t,
      workspaceDir: t.workspace.root!,
      candidate: await reference(t),
    });
    expect(again.reward).toBe(1);
  }, 30_000);

  it('an answer key that fails on this node judges no candidate: an error, never a 0 (the reference itself is still scored, for calibration)', async () => {
    // The workspace's target is not the task's reference (another checkout, or a workspace this node
    // cannot read: the reference run then gives no verdict). Either way the node cannot judge.
    const task = { ...tasks['strings']!, referenceHash: `sha256:${'0'.repeat(64)}` };
    const ref = await reference(task);
    const candidate = ref.replace("join('-')", "join('_')");
    const r = await scorer.score({ task, workspaceDir: VITEST_WS, candidate });
    expect(r.status).toBe('error');
    expect(r.reward).toBeNull();
    expect(r.error).toMatch(/the reference does not pass on this node.*not the task's reference/);
    const self = await scorer.score({ task, workspaceDir: VITEST_WS, candidate: ref });
    expect(self.status).toBe('scored');
    expect(self.reward).toBe(0);
    expect(self.reasons.join(' ')).toMatch(/not the task's reference/);
  }, 60_000);

  it('refuses a truncated generation', async () => {
    const t = tasks['math']!;
    const r = await scorer.score({
      task: t,
      workspaceDir: t.workspace.root!,
      candidate: await reference(t),
      truncated: true,
    });
    expect(r.reward).toBe(0);
    expect(r.reasons).toContain('the generation was truncated');
  }, 30_000);
});

describe('self-test', () => {
  it('fails without confinement (the canaries can detect an escape)', async () => {
    const result = await runSelfTest(createUnconfined());
    expect(result.ok).toBe(false);
    const failed = result.checks.filter((c) => !c.ok).map((c) => c.name);
    expect(failed).toEqual(
      expect.arrayContaining(['read-secret-0', 'network', 'listener saw no connection']),
    );
  }, 30_000);
});

describe('CLI', () => {
  it('calibrate keeps every correct reference and drops the broken one with its reason', async () => {
    const out = join(dir, 'kept.jsonl');
    const { stdout, stderr } = await cli([
      'calibrate',
      '--tasks',
      tasksFile,
      '--out',
      out,
      '--jobs',
      '2',
      '--json',
    ]);
    const summary = JSON.parse(stdout) as { kept: number; dropped: { taskId: string; reason: string }[] };
    expect(summary.kept).toBe(4);
    expect(summary.dropped).toEqual([
      {
        taskId: 'vitest-ts/clock-broken',
        reason: expect.stringMatching(/reference scored 0.5: 1 of 2 tests failed/),
      },
    ]);
    expect(stderr).toMatch(/kept 4, dropped 1/);
    const kept = (await readFile(out, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as Task).id);
    expect(kept).toEqual([
      'node-basic/math',
      'vitest-ts/strings',
      'vitest-ts/stack',
      'vitest-ts/strings-tests',
    ]);
  }, 180_000);

  it('score --json prints the contract', async () => {
    const candidate = join(dir, 'math.js');
    await writeFile(candidate, (await reference(tasks['math']!)).replace('return a + b;', 'return a - b;'));
    const { stdout } = await cli([
      'score',
      '--tasks',
      tasksFile,
      '--task',
      'node-basic/math',
      '--candidate',
      candidate,
      '--json',
    ]);
    const r = JSON.parse(stdout) as Record<string, unknown>;
    expect(r).toMatchObject({
      reward: expect.any(Number),
      passed: 5,
      failed: 1,
    });
    expect(r['reward']).toBeCloseTo(5 / 6, 6);
    expect(r['reasons']).toEqual(['1 of 6 tests failed']);
    expect(r['fingerprint']).toMatch(/^sha256:[0-9a-f]{64}$/);
  }, 60_000);

  it('names bad input', async () => {
    const bad = join(dir, 'bad.jsonl');
    await writeFile(bad, `${JSON.stringify(tasks['math'])}\n{"id": "x"}\n`);
    await expect(cli(['score', '--tasks', bad, '--task', 'x', '--candidate', bad])).rejects.toMatchObject({
      stderr: expect.stringMatching(/bad\.jsonl:2: .*kind/),
    });
    await expect(
      cli(['score', '--tasks', tasksFile, '--task', 'nope', '--candidate', bad]),
    ).rejects.toMatchObject({
      stderr: expect.stringMatching(/task nope is not in/),
    });
    await expect(cli(['calibrate', '--tasks', tasksFile])).rejects.toMatchObject({ code: 2 });
  }, 30_000);
});
