// End-to-end: mutant schemata and batched mutation runs in the real sandbox (bubblewrap), with the
// judges the scorer uses, on examples/ledger (vitest, TypeScript) and the node-basic fixture
// (node:test, JavaScript).
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createBwrapConfinement } from '../../../sandbox/bwrap.ts';
import type { Confinement } from '../../../sandbox/confinement.ts';
import type { TestCase } from '../../../sandbox/judges/verdict.ts';
import { functionKeys, parseSource } from '../../../sandbox/mutation/ast.ts';
import { enumerateMutants } from '../../../sandbox/mutation/mutants.ts';
import { prepareMutationRun } from '../../../sandbox/mutation/plan.ts';
import { instrument } from '../../../sandbox/mutation/schemata.ts';
import { FIXTURES, NODE_WS, REPO_ROOT } from '../fixtures.ts';
import { runCommandInBox, runPlans, runTestsInBox } from './harness.ts';

const LEDGER = join(REPO_ROOT, 'examples', 'ledger');
/** jest + ts-jest, installed with `npm ci` in that folder. */
const JEST_WS = join(FIXTURES, 'jest-ts');
const TRIVIAL_VITEST = "import { expect, it } from 'vitest';\n\nit('x', () => expect(1 + 1).toBe(2));\n";

let confinement: Confinement;
beforeAll(async () => {
  confinement = await createBwrapConfinement();
});

/** Workspace-relative files under `dir` whose path matches. */
async function filesUnder(root: string, dir: string, match: RegExp): Promise<string[]> {
  const all = await readdir(join(root, dir), { recursive: true });
  return all
    .map((f) => `${dir}/${f.split('\\').join('/')}`)
    .filter((f) => match.test(f))
    .sort();
}

/** Every source file instrumented with all of its mutants (none active): the overlay of a box. */
async function instrumentAll(root: string, sources: string[]): Promise<Record<string, string>> {
  const overlay: Record<string, string> = {};
  for (const path of sources) {
    const text = await readFile(join(root, path), 'utf8');
    overlay[path] = instrument(text, path, enumerateMutants(text, path)).text;
  }
  return overlay;
}

const byKey = (cases: TestCase[]) => cases.map((c) => `${c.file} :: ${c.name} :: ${c.status}`).sort();

describe('no mutant active: the real test suites behave exactly as against the original sources', () => {
  it('examples/ledger (vitest, TypeScript): same cases and results; tsc over tests and sources still passes', async () => {
    const sources = await filesUnder(LEDGER, 'src', /^src\/.*(?<!\.test)(?<!\.test-d)\.ts$/);
    const tests = [
      ...(await filesUnder(LEDGER, 'src', /\.test\.ts$/)),
      ...(await filesUnder(LEDGER, 'tests', /\.test\.ts$/)),
    ];
    expect(sources.length).toBeGreaterThan(15);
    const overlay = await instrumentAll(LEDGER, sources);
    const base = { confinement, workspace: LEDGER, runner: 'vitest' as const, testFiles: tests };
    const original = await runTestsInBox({ ...base, overlay: {} });
    const instrumented = await runTestsInBox({ ...base, overlay });
    expect(original.verdict.errors).toEqual([]);
    expect(original.verdict.cases.length).toBeGreaterThan(70);
    expect(original.verdict.cases.every((c) => c.status === 'passed')).toBe(true);
    expect(byKey(instrumented.verdict.cases)).toEqual(byKey(original.verdict.cases));
    expect(instrumented.verdict.errors).toEqual([]);
    expect(instrumented.run.exitCode).toBe(0);
    // The expression mutants keep the static type of what they replace: every importer type-checks.
    const tsc = await runCommandInBox({
      confinement,
      workspace: LEDGER,
      overlay,
      argv: async (box) => [
        process.execPath,
        join(box, 'node_modules', 'typescript', 'bin', 'tsc'),
        '--noEmit',
        '-p',
        'tsconfig.json',
      ],
    });
    expect(`${tsc.run.stdout}${tsc.run.stderr}`).toBe('');
    expect(tsc.run.exitCode).toBe(0);
  }, 600_000);

  it('node-basic (node:test, JavaScript): same cases and results', async () => {
    const overlay = await instrumentAll(NODE_WS, ['src/math.js']);
    const base = {
      confinement,
      workspace: NODE_WS,
      runner: 'node:test' as const,
      testFiles: ['test/math.test.js'],
    };
    const original = await runTestsInBox({ ...base, overlay: {} });
    const instrumented = await runTestsInBox({ ...base, overlay });
    expect(original.verdict.cases.length).toBe(8);
    expect(byKey(instrumented.verdict.cases)).toEqual(byKey(original.verdict.cases));
    expect(instrumented.verdict.errors).toEqual(original.verdict.errors);
  }, 300_000);
});

describe('batched mutation runs: one runner invocation runs every mutant of a test file', () => {
  const ledgerPlan = async (
    target: string,
    testPath: string,
    text?: string,
    registry: 'auto' | 'per-file' = 'auto',
  ) =>
    prepareMutationRun({
      runner: 'vitest',
      sources: [{ path: target, text: await readFile(join(LEDGER, target), 'utf8') }],
      testFile: { path: testPath, text: text ?? (await readFile(join(LEDGER, testPath), 'utf8')) },
      max: 10,
      salt: 'sandbox-test',
      registry,
    });

  it('examples/ledger: original test files kill most mutants, a trivial one none, one reading the old switch nothing more than its assertion', async () => {
    const amount = await ledgerPlan('src/money/amount.ts', 'src/money/amount.test.ts');
    const csv = await ledgerPlan('src/parse/csv.ts', 'src/parse/csv.test.ts');
    const period = await ledgerPlan('src/dates/period.ts', 'src/dates/period.test.ts');
    const trivial = await ledgerPlan('src/money/amount.ts', 'src/money/trivial.test.ts', TRIVIAL_VITEST);
    const detecting = await ledgerPlan(
      'src/money/amount.ts',
      'src/money/detecting.test.ts',
      [
        "import { expect, it } from 'vitest';",
        "import { money } from './amount.ts';",
        '',
        "it('fails whenever any switch is set', () => {",
        "  expect((globalThis as Record<string, { active: unknown }>)['__vtnode_mutation']?.active ?? null).toBe(null);",
        "  expect(money('1', 'USD').minor).toBe(100n);",
        '});',
        '',
      ].join('\n'),
    );
    const plans = [amount, csv, period, trivial, detecting];
    // The three sources keep no module state: one shared registry (vitest --isolate=false) for all.
    expect(plans.map((p) => p.plan.registry)).toEqual(['shared', 'shared', 'shared', 'shared', 'shared']);
    const run = await runPlans(
      confinement,
      LEDGER,
      plans.map((p) => p.plan),
      { wallMs: 600_000 },
    );
    const [a, c, p, t, d] = run.results;
    for (const [i, r] of [a!, c!, p!].entries()) {
      const m = r.matrix;
      expect(m.reference).toBe('passed');
      expect(m.missing).toEqual([]);
      expect(m.unattributed).toEqual([]);
      expect(m.decoysKilled).toEqual([]);
      expect(m.killed.length + m.survived.length + m.hung.length).toBe(plans[i]!.mutants.length);
      expect(m.killed.length / plans[i]!.mutants.length).toBeGreaterThanOrEqual(0.75);
      // The reference copy reports which functions the tests entered.
      expect(Object.keys(r.coverage!.cov[plans[i]!.mutants[0]!.file] ?? {}).length).toBeGreaterThan(2);
    }
    expect(t!.matrix.reference).toBe('passed');
    expect(t!.matrix.killed).toEqual([]);
    expect(t!.matrix.survived).toHaveLength(trivial.mutants.length);
    expect(t!.coverage!.cov).toEqual({}); // it never entered the target
    // There is no switch to read any more: the test file kills what its one assertion detects.
    expect(d!.matrix.reference).toBe('passed');
    expect(d!.matrix.killed.length).toBeLessThan(detecting.mutants.length / 2);
    expect(d!.matrix.decoysKilled).toEqual([]);

    // Neither the shared registry nor batching changes an outcome: the same mutants with a fresh
    // registry per copy, and two of them run alone (one runner per mutant), agree.
    const perFile = await ledgerPlan(
      'src/money/amount.ts',
      'src/money/amount.test.ts',
      undefined,
      'per-file',
    );
    expect(perFile.mutants).toEqual(amount.mutants); // amount.ts has no module-level mutant
    const pf = (await runPlans(confinement, LEDGER, [perFile.plan], { wallMs: 600_000 })).results[0]!.matrix;
    expect(pf.killed.sort()).toEqual([...a!.matrix.killed].sort());
    const killed = a!.matrix.killed[0]!;
    const survived = a!.matrix.survived[0] ?? a!.matrix.killed[1]!;
    for (const id of [killed, survived]) {
      const copy = [...perFile.plan.mutantOf].find(([, x]) => x === id)![0];
      const alone = await runTestsInBox({
        confinement,
        workspace: LEDGER,
        overlay: perFile.plan.overlay,
        runner: 'vitest',
        testFiles: [copy],
      });
      const failed =
        alone.verdict.cases.some((x) => x.status === 'failed') || alone.verdict.errors.length > 0;
      expect(failed, id).toBe(a!.matrix.killed.includes(id));
    }
  }, 900_000);

  it('node-basic (node:test): infinite-loop mutants end as hung, the others are killed; a trivial test file kills none', async () => {
    const source = { path: 'src/math.js', text: await readFile(join(NODE_WS, 'src', 'math.js'), 'utf8') };
    const original = prepareMutationRun({
      runner: 'node:test',
      sources: [source],
      testFile: {
        path: 'test/math.test.js',
        text: await readFile(join(NODE_WS, 'test', 'math.test.js'), 'utf8'),
      },
      salt: 'node',
    });
    const trivial = prepareMutationRun({
      runner: 'node:test',
      sources: [source],
      testFile: {
        path: 'test/trivial.test.js',
        text: "import assert from 'node:assert/strict';\nimport { test } from 'node:test';\n\ntest('x', () => assert.equal(1 + 1, 2));\n",
      },
      salt: 'node',
    });
    const run = await runPlans(confinement, NODE_WS, [original.plan, trivial.plan]);
    const [o, t] = run.results;
    expect(o!.matrix.reference).toBe('passed');
    expect(o!.matrix.survived).toEqual([]);
    const hung = o!.matrix.hung.map((id) => original.mutants.find((m) => m.id === id)!.original).sort();
    // gcd's remainder step and range's counter: each mutant loops forever and is stopped.
    expect(hung).toEqual(expect.arrayContaining(['a % b', 'i++']));
    expect(o!.matrix.killed.length + hung.length).toBe(original.mutants.length);
    expect(o!.coverage!.cov).toEqual({ 'src/math.js': { add: 1, gcd: 2, range: 2 } });
    expect(t!.matrix.killed).toEqual([]);
    expect(t!.matrix.hung).toEqual([]);
    expect(t!.matrix.reference).toBe('passed');
  }, 300_000);
});

describe('jest with ts-jest, which type-checks every file it compiles', () => {
  const source = async () => ({
    path: 'src/stats.ts',
    text: await readFile(join(JEST_WS, 'src', 'stats.ts'), 'utf8'),
  });
  const testText = () => readFile(join(JEST_WS, 'test', 'stats.test.ts'), 'utf8');

  it('no mutant active: same results; the importer still compiles, and would not without `as never`', async () => {
    const { path, text } = await source();
    const instrumented = instrument(text, path, enumerateMutants(text, path)).text;
    const base = {
      confinement,
      workspace: JEST_WS,
      runner: 'jest' as const,
      testFiles: ['test/stats.test.ts'],
    };
    const original = await runTestsInBox({ ...base, overlay: {} });
    const same = await runTestsInBox({ ...base, overlay: { [path]: instrumented } });
    expect(original.verdict.cases.map((c) => c.status)).toEqual(['passed', 'passed', 'passed']);
    expect(byKey(same.verdict.cases)).toEqual(byKey(original.verdict.cases));
    expect(same.verdict.errors).toEqual([]);
    // Control: without the assertions the literal return type of grade() widens ('' | 'A' | …) and
    // ts-jest refuses to compile the test file, which proves it type-checked the passing run above.
    const widened = await runTestsInBox({
      ...base,
      overlay: { [path]: instrumented.replaceAll(' as never', '') },
    });
    expect(widened.verdict.cases).toEqual([]);
    expect(widened.verdict.errors).toHaveLength(1);
    expect(`${widened.run.stdout}${widened.run.stderr}`).toMatch(/TS2322/);
  }, 600_000);

  it('batched: the original test file kills most mutants, a trivial one none', async () => {
    const src = await source();
    const original = prepareMutationRun({
      runner: 'jest',
      sources: [src],
      testFile: { path: 'test/stats.test.ts', text: await testText() },
      max: 10,
      salt: 'jest',
    });
    const trivial = prepareMutationRun({
      runner: 'jest',
      sources: [src],
      testFile: { path: 'test/trivial.test.ts', text: "it('x', () => expect(1 + 1).toBe(2));\n" },
      max: 10,
      salt: 'jest',
    });
    const run = await runPlans(confinement, JEST_WS, [original.plan, trivial.plan], { wallMs: 600_000 });
    const [o, t] = run.results;
    expect(o!.matrix.reference).toBe('passed');
    expect(o!.matrix.missing).toEqual([]);
    expect(o!.matrix.decoysKilled).toEqual([]);
    expect(o!.matrix.killed.length / original.mutants.length).toBeGreaterThanOrEqual(0.75);
    // The original enters every function of the target, callbacks included.
    const functions = [...functionKeys(parseSource(src.text, src.path)).values()];
    expect(functions).toHaveLength(5);
    expect(Object.keys(o!.coverage!.cov['src/stats.ts']!).sort()).toEqual([...functions].sort());
    expect(t!.matrix.reference).toBe('passed');
    expect(t!.matrix.killed).toEqual([]);
    expect(t!.matrix.survived).toHaveLength(trivial.mutants.length);
  }, 900_000);
});
