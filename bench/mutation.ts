// Mutation-testing benchmark on examples/ledger, confined with bubblewrap: mutants per source file,
// the kill rate of each original test file (one batched vitest run per test file, module registry
// chosen by `auto`), the kills of a trivial test file, and the CPU of a batched run (per-file and
// shared registry) against one vitest run per mutant, in the same session.
// Run: npx node bench/mutation.ts [--max 32] [--per-mutant src/money/amount.test.ts,...] [--json]
import { readdir, readFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { parseArgs } from 'node:util';
import ts from 'typescript';
import { createBwrapConfinement } from '../sandbox/bwrap.ts';
import { prepareMutationRun } from '../sandbox/mutation/plan.ts';
import { workspaceModules } from '../sandbox/mutation/resolve.ts';
import { REPO_ROOT } from '../test/sandbox/fixtures.ts';
import { runPlans, runTestsInBox } from '../test/sandbox/mutation/harness.ts';

const { values } = parseArgs({
  options: {
    max: { type: 'string', default: '32' },
    'per-mutant': { type: 'string', default: 'src/money/amount.test.ts' },
    json: { type: 'boolean', default: false },
  },
});
const max = Number(values.max);
const LEDGER = join(REPO_ROOT, 'examples', 'ledger');
const TRIVIAL = "import { expect, it } from 'vitest';\n\nit('x', () => expect(1 + 1).toBe(2));\n";
const confinement = await createBwrapConfinement();

/** The workspace's test files (the vitest include globs of examples/ledger). */
async function testFiles(): Promise<string[]> {
  const all = await readdir(LEDGER, { recursive: true });
  return all
    .filter((f) => /^(src|tests)\//.test(f) && f.endsWith('.test.ts'))
    .map((f) => f.split('\\').join('/'))
    .sort();
}

/**
 * The sources a test file is about: those it imports directly (relative or `@ledger/` specifiers)
 * from its own folder or with its own name; all it imports when none is. Helpers it only uses to
 * build inputs (amount.ts in most test files) are left out: their mutants measure other tests.
 */
async function sourcesOf(testPath: string, text: string): Promise<string[]> {
  const imported = await importedSources(testPath, text);
  const stem = (p: string) => posix.basename(p).split('.')[0];
  const own = imported.filter(
    (p) => posix.dirname(p) === posix.dirname(testPath) || stem(p) === stem(testPath),
  );
  return own.length > 0 ? own : imported;
}

async function importedSources(testPath: string, text: string): Promise<string[]> {
  const sf = ts.createSourceFile(testPath, text, ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  for (const s of sf.statements) {
    if (!ts.isImportDeclaration(s) || !ts.isStringLiteral(s.moduleSpecifier) || s.importClause?.isTypeOnly)
      continue;
    const spec = s.moduleSpecifier.text;
    const path = spec.startsWith('@ledger/')
      ? posix.join('src', spec.slice('@ledger/'.length))
      : spec.startsWith('.')
        ? posix.join(posix.dirname(testPath), spec)
        : null;
    if (path && !path.endsWith('.test.ts') && path !== 'src/index.ts') out.push(path);
  }
  return [...new Set(out)];
}

async function planFor(
  testPath: string,
  text: string,
  sources: string[],
  registry: 'per-file' | 'shared' | 'auto' = 'auto',
): Promise<ReturnType<typeof prepareMutationRun>> {
  return prepareMutationRun({
    registry,
    runner: 'vitest',
    sources: await Promise.all(
      sources.map(async (path) => ({ path, text: await readFile(join(LEDGER, path), 'utf8') })),
    ),
    testFile: { path: testPath, text },
    max,
    salt: 'bench',
    access: workspaceModules(LEDGER),
  });
}

interface Row {
  testFile: string;
  sources: string[];
  enumerated: number;
  selected: number;
  killed: number;
  survived: number;
  hung: number;
  killRate: number;
  reference: string;
  registry: string;
  batchedCpuSeconds: number;
  batchedWallSeconds: number;
}

const rows: Row[] = [];
const log = (line: string) => {
  if (!values.json) console.log(line);
};
log(`examples/ledger, max ${max} mutants per test file, bwrap, ${new Date().toISOString()}`);
for (const testPath of await testFiles()) {
  const text = await readFile(join(LEDGER, testPath), 'utf8');
  const sources = await sourcesOf(testPath, text);
  if (sources.length === 0) continue;
  const { plan, mutants, enumerated } = await planFor(testPath, text, sources);
  const r = await runPlans(confinement, LEDGER, [plan]);
  const m = r.results[0]!.matrix;
  const row: Row = {
    testFile: testPath,
    sources,
    enumerated,
    selected: mutants.length,
    killed: m.killed.length,
    survived: m.survived.length,
    hung: m.hung.length,
    killRate: m.killed.length / Math.max(1, m.killed.length + m.survived.length),
    reference: m.reference,
    registry: plan.registry,
    batchedCpuSeconds: r.cpuSeconds,
    batchedWallSeconds: r.run.usage.wallMs / 1000,
  };
  rows.push(row);
  log(
    `${testPath.padEnd(40)} sources ${sources.join(',')} | mutants ${enumerated} → ${mutants.length} | killed ${row.killed} survived ${row.survived} hung ${row.hung} (${(row.killRate * 100).toFixed(0)} %) | reference ${row.reference} | ${row.registry} registry, batched CPU ${row.batchedCpuSeconds.toFixed(1)} s`,
  );
}

/**
 * Per-mutant baseline: one runner invocation per mutant, each with only that mutant's copy (per-file
 * plan, so module-level mutants are in), against the batched run of the same mutants with a per-file
 * registry and, when the source has no module state, with a shared one.
 */
async function perMutant(testPath: string): Promise<Record<string, number | string>> {
  const text = await readFile(join(LEDGER, testPath), 'utf8');
  const sources = await sourcesOf(testPath, text);
  const { plan, mutants } = await planFor(testPath, text, sources, 'per-file');
  const shared = await planFor(testPath, text, sources, 'auto');
  const trivial = (await planFor(testPath.replace(/[^/]+$/, 'trivial.test.ts'), TRIVIAL, sources)).plan;
  const batched = await runPlans(confinement, LEDGER, [plan]);
  const sharedRun =
    shared.plan.registry === 'shared' ? await runPlans(confinement, LEDGER, [shared.plan]) : null;
  const trivialRun = await runPlans(confinement, LEDGER, [trivial]);
  let cpu = 0;
  let wall = 0;
  let agree = 0;
  for (const m of mutants) {
    const copy = [...plan.mutantOf].find(([, id]) => id === m.id)![0];
    const r = await runTestsInBox({
      confinement,
      workspace: LEDGER,
      overlay: plan.overlay,
      runner: 'vitest',
      testFiles: [copy],
    });
    cpu += r.cpuSeconds;
    wall += r.run.usage.wallMs / 1000;
    const killedAlone = r.verdict.cases.some((c) => c.status === 'failed') || r.verdict.errors.length > 0;
    if (killedAlone === batched.results[0]!.matrix.killed.includes(m.id)) agree++;
  }
  const sharedAgree = sharedRun
    ? shared.mutants.filter(
        (m) =>
          sharedRun.results[0]!.matrix.killed.includes(m.id) ===
          batched.results[0]!.matrix.killed.includes(m.id),
      ).length
    : 0;
  return {
    testFile: testPath,
    mutants: mutants.length,
    batchedCpuSeconds: Number(batched.cpuSeconds.toFixed(2)),
    sharedCpuSeconds: sharedRun ? Number(sharedRun.cpuSeconds.toFixed(2)) : 'n/a (module state)',
    perMutantCpuSeconds: Number(cpu.toFixed(2)),
    cpuRatio: Number((cpu / batched.cpuSeconds).toFixed(2)),
    sharedCpuRatio: sharedRun ? Number((cpu / sharedRun.cpuSeconds).toFixed(2)) : 'n/a',
    batchedWallSeconds: Number((batched.run.usage.wallMs / 1000).toFixed(2)),
    perMutantWallSeconds: Number(wall.toFixed(2)),
    verdictsAgree: `${agree}/${mutants.length}`,
    sharedAgreesWithPerFile: sharedRun ? `${sharedAgree}/${shared.mutants.length}` : 'n/a',
    trivialKilled: trivialRun.results[0]!.matrix.killed.length,
  };
}

const comparisons: Record<string, number | string>[] = [];
for (const testPath of values['per-mutant'].split(',').filter(Boolean)) {
  const c = await perMutant(testPath);
  comparisons.push(c);
  log(
    `${testPath}: ${c['mutants']} mutants; one run per mutant ${c['perMutantCpuSeconds']} s CPU; batched per-file ${c['batchedCpuSeconds']} s (×${c['cpuRatio']}), shared ${c['sharedCpuSeconds']} s (×${c['sharedCpuRatio']}); wall ${c['batchedWallSeconds']} s vs ${c['perMutantWallSeconds']} s; per-mutant verdicts agree ${c['verdictsAgree']}, shared agrees ${c['sharedAgreesWithPerFile']}; trivial test file kills ${c['trivialKilled']}`,
  );
}
const total = rows.reduce((a, r) => ({ k: a.k + r.killed, s: a.s + r.survived }), { k: 0, s: 0 });
log(
  `overall kill rate of the original test files: ${total.k}/${total.k + total.s} (${((total.k / (total.k + total.s)) * 100).toFixed(0)} %)`,
);
if (values.json) console.log(JSON.stringify({ max, rows, comparisons }, null, 2));
