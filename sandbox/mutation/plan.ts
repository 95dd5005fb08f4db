import { posix } from 'node:path';
import ts from 'typescript';
import { z } from 'zod';
import { sha256Hex } from '../../protocol/canonical.ts';
import type { TestRunner } from '../../protocol/task.ts';
import type { TestCase, Verdict } from '../judges/verdict.ts';
import { extensionOf, isTypeScript, parseSource } from './ast.ts';
import {
  type CopyRunner,
  copyPath,
  importGraph,
  type ModuleAccess,
  materialise,
  rewriteTest,
  stubSource,
} from './copies.ts';
import { enumerateMutants, type Mutant } from './mutants.ts';
import { DEFAULT_HIT_LIMIT, HIT_LIMIT_MARKER, tokenFor } from './schemata.ts';
import { selectMutants } from './select.ts';

/** Runners whose test files each get a fresh module registry, which the batched run relies on. */
export type PlanRunner = CopyRunner;

/** The plan cannot be made for this runner or input. */
export class MutationPlanError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MutationPlanError';
  }
}

export interface PlanOptions {
  runner: TestRunner;
  /** The sources under test (workspace-relative path and text): every mutant and decoy is in one. */
  sources: { path: string; text: string }[];
  /** The judged test file: workspace-relative path and the text to judge (the original or a candidate). */
  testFile: { path: string; text: string };
  /** The mutants to run, one copy of the test file each. */
  mutants: Mutant[];
  /** Decoys: edits that change nothing; a test file that "kills" one tells copies apart by other means than behaviour. */
  decoys?: Mutant[];
  /** The reference copy's edit (a decoy of its own, so that every copy differs from the sources in one place). */
  referenceEdit?: Mutant | null;
  /** Secret of the copies' tokens and file names (a fresh random one per run in production). */
  salt: string;
  /** Finds and reads the workspace modules between the test file and the sources (default: relative specifiers among the given files only). */
  access?: ModuleAccess;
  /** Hit limit of every copy (default DEFAULT_HIT_LIMIT). */
  hitLimit?: number;
  /** Text of the test file's snapshot file (`__snapshots__/<name>.snap`), copied beside each copy. */
  snapshot?: string | null;
  /** `per-file` (default): each copy gets a fresh module registry; `shared`: vitest `--isolate=false` (see Registry). */
  registry?: Registry;
}

/**
 * How the copies' modules are loaded. `per-file`: each copy gets a fresh module registry (vitest's
 * default isolation, jest always, node:test's process per file). `shared` (vitest `--isolate=false`,
 * about 6× less CPU per copy): every module is loaded once per worker; each copy still loads its own
 * copies of the sources and of the modules between them and the test file, but the modules it shares
 * with the other copies (the runner, helpers that import no source) keep their state from one copy to
 * the next, which is why it is meant for stateless sources (moduleState) only.
 */
export type Registry = 'per-file' | 'shared';

/** The box overlay of one batched run, and how to read its verdict. */
export interface MutationPlan {
  runner: PlanRunner;
  /** The runner must load modules this way (`shared`: vitest with `--isolate=false`). */
  registry: Registry;
  /** Workspace-relative path → content, written over the workspace's clone. */
  overlay: Record<string, string>;
  /** The test files to run (box-relative), in one runner invocation. */
  testFiles: string[];
  /** Test file → the mutant (or decoy) id it runs under, null for the reference copy. */
  mutantOf: Map<string, string | null>;
  /** Ids of the decoys among `mutantOf`'s values. */
  decoys: Set<string>;
  /** The copy with no active mutant. */
  referenceFile: string;
  /** The original test file the copies stand for (its cases are reported under this path). */
  originalFile: string;
  /** Box-relative file the reference copy writes its coverage to (see MutationCoverage). */
  coverageFile: string;
  /** Workspace files each copy has its own copy of: the sources the test file reaches and the modules on the way. */
  copied: string[];
}

/** The coverage document the reference copy writes after its tests. */
export const MutationCoverage = z.object({
  format: z.literal('vtnode-mutation-coverage/1'),
  /** Loop iterations plus function entries of the reference copy. */
  hits: z.number().int().nonnegative(),
  tripped: z.boolean(),
  /** Function entries per instrumented file and function key. */
  cov: z.record(z.string(), z.record(z.string(), z.number().int().nonnegative())),
});
export type MutationCoverage = z.infer<typeof MutationCoverage>;

/** Parses the coverage file (written inside the box, so untrusted). */
export function parseCoverage(text: string): MutationCoverage {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new MutationPlanError(`the mutation coverage file is not JSON (${(err as Error).message})`);
  }
  const parsed = MutationCoverage.safeParse(raw);
  if (!parsed.success)
    throw new MutationPlanError(
      `the mutation coverage file is malformed: ${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.')}: ${i.message}`)
        .join('; ')}`,
    );
  return parsed.data;
}

/** The runner as a plan runner, or why it cannot batch mutants. */
export function planRunner(runner: TestRunner): PlanRunner {
  if (runner === 'mocha')
    // mocha loads every spec file before running any test and keeps one `require` cache for all of
    // them: a copy cannot switch the mutant at load time (the last one loaded would win) and the
    // target's module-level code runs once. It needs another strategy: `mocha --parallel` (a worker
    // loads and runs one file at a time) with module-level mutants left out, or each copy wrapped in
    // a root `describe` whose `before`/`after` hooks switch the mutant.
    throw new MutationPlanError(
      'mocha shares one module registry and loads every file before running tests: batched mutants need --parallel or per-suite hooks (not implemented)',
    );
  return runner;
}

/** `dir/amount.test.ts` + tag → `dir/amount.<tag>.test.ts`: the suffix (and any include glob) still matches. */
export function taggedPath(path: string, tag: string): string {
  const dir = posix.dirname(path);
  const base = posix.basename(path);
  const dot = base.indexOf('.', 1);
  const name = dot < 0 ? `${base}.${tag}` : `${base.slice(0, dot)}.${tag}${base.slice(dot)}`;
  return dir === '.' ? name : `${dir}/${name}`;
}

/** `dir/amount.test.ts` + tag + suffix → `dir/amount.<tag><suffix>`: a file that belongs to one copy. */
export function companionPath(path: string, tag: string, suffix: string): string {
  const dir = posix.dirname(path);
  const base = posix.basename(path);
  const dot = base.indexOf('.', 1);
  const name = `${dot < 0 ? base : base.slice(0, dot)}.${tag}${suffix}`;
  return dir === '.' ? name : `${dir}/${name}`;
}

/** Where vitest and jest keep a test file's snapshots by default. */
export function snapshotPathOf(testPath: string): string {
  const dir = posix.dirname(testPath);
  return posix.join(dir, '__snapshots__', `${posix.basename(testPath)}.snap`);
}

/**
 * True when the copy imports its activator with ES syntax (`import "./…"`), false for `require(…)`.
 * vitest treats every file as an ES module; jest compiles TypeScript, so an import is always valid
 * there (and `require` would need Node's types, which a ts-jest project may not have); otherwise the
 * extension decides, then the file's own import/export syntax.
 */
function isEsm(text: string, path: string, runner: PlanRunner): boolean {
  const ext = extensionOf(path);
  if (runner === 'vitest' || ext === '.mjs' || ext === '.mts') return true;
  if (runner === 'jest' && isTypeScript(path)) return true;
  if (ext === '.cjs' || ext === '.cts') return false;
  const sf = parseSource(text, path);
  return sf.statements.some(
    (s) => ts.isImportDeclaration(s) || ts.isExportDeclaration(s) || ts.isExportAssignment(s) || hasExport(s),
  );
}

const hasExport = (s: ts.Statement): boolean =>
  ts.canHaveModifiers(s) && (ts.getModifiers(s) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);

/** The activator's extension: the test file's, without JSX. */
const activatorExt = (testPath: string): string =>
  extensionOf(testPath).replace(/^\.d/, '').replace('tsx', 'ts').replace('jsx', 'js');

/**
 * How the test file writes relative imports, so the activator import resolves the same way (with the
 * real extension, with `.js` for a TypeScript file, or without extension).
 */
function specifierFor(testText: string, testPath: string, activatorPath: string, runner: PlanRunner): string {
  const sf = parseSource(testText, testPath);
  const specs: string[] = [];
  const visit = (n: ts.Node): void => {
    if (
      (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) &&
      n.moduleSpecifier &&
      ts.isStringLiteral(n.moduleSpecifier)
    )
      specs.push(n.moduleSpecifier.text);
    else if (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'require') {
      const a = n.arguments[0];
      if (a && ts.isStringLiteral(a)) specs.push(a.text);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  const relative = specs.filter((s) => s.startsWith('./') || s.startsWith('../'));
  const real = `./${posix.basename(activatorPath)}`;
  const bare = real.replace(/\.[cm]?[jt]s$/, '');
  const style =
    relative.length === 0
      ? runner === 'jest'
        ? 'bare'
        : 'real'
      : relative.some((s) => /\.[cm]?tsx?$/.test(s))
        ? 'real'
        : relative.some((s) => /\.[cm]?jsx?$/.test(s))
          ? 'js'
          : 'bare';
  if (style === 'real') return real;
  if (style === 'bare') return bare;
  return real
    .replace(/\.ts$/, '.js')
    .replace(/\.mts$/, '.mjs')
    .replace(/\.cts$/, '.cjs');
}

/**
 * Module-level bindings and statements of a source that may hold or change state a shared registry
 * would carry from one copy to the next: `let`/`var`, `const` bound to anything but a literal, a
 * function or a class, static fields (unless readonly and immutable) and top-level expression
 * statements. Empty: safe to share. Syntactic, so conservative about objects and blind to state held
 * elsewhere (a helper module, globalThis).
 */
export function moduleState(source: string, file: string): string[] {
  const sf = parseSource(source, file);
  const reasons: string[] = [];
  const immutable = (e: ts.Expression | undefined): boolean => {
    if (!e) return true;
    let x = e;
    while (ts.isParenthesizedExpression(x) || ts.isAsExpression(x) || ts.isSatisfiesExpression(x))
      x = x.expression;
    return (
      ts.isLiteralExpression(x) ||
      ts.isNoSubstitutionTemplateLiteral(x) ||
      ts.isArrowFunction(x) ||
      ts.isFunctionExpression(x) ||
      ts.isClassExpression(x) ||
      ts.isIdentifier(x) ||
      x.kind === ts.SyntaxKind.TrueKeyword ||
      x.kind === ts.SyntaxKind.FalseKeyword ||
      x.kind === ts.SyntaxKind.NullKeyword ||
      (ts.isPrefixUnaryExpression(x) && ts.isNumericLiteral(x.operand))
    );
  };
  for (const st of sf.statements) {
    if (ts.isVariableStatement(st)) {
      const isConst = (st.declarationList.flags & ts.NodeFlags.Const) !== 0;
      for (const d of st.declarationList.declarations)
        if (!isConst || !immutable(d.initializer))
          reasons.push(`module-level ${isConst ? 'const' : 'let/var'} ${d.name.getText(sf)}`);
    } else if (ts.isExpressionStatement(st) && !ts.isStringLiteral(st.expression)) {
      const { line } = sf.getLineAndCharacterOfPosition(st.getStart(sf));
      reasons.push(`module-level statement at line ${line + 1}`);
    } else if (ts.isClassDeclaration(st)) {
      for (const m of st.members) {
        const mods = ts.canHaveModifiers(m) ? (ts.getModifiers(m) ?? []) : [];
        const has = (k: ts.SyntaxKind) => mods.some((x) => x.kind === k);
        // A static field is module state unless it is readonly and bound to an immutable value.
        if (
          ts.isPropertyDeclaration(m) &&
          has(ts.SyntaxKind.StaticKeyword) &&
          !(has(ts.SyntaxKind.ReadonlyKeyword) && immutable(m.initializer))
        )
          reasons.push(`static field ${st.name?.text ?? 'default'}.${m.name.getText(sf)}`);
      }
    }
  }
  return reasons;
}

/** The test file with an import of its activator as its first statement (after the prologue). */
function withActivator(testText: string, testPath: string, specifier: string, esm: boolean): string {
  const sf = parseSource(testText, testPath);
  const first = sf.statements.find((s) => !(ts.isExpressionStatement(s) && ts.isStringLiteral(s.expression)));
  const at = first ? first.getStart(sf) : testText.length;
  const line = esm ? `import ${JSON.stringify(specifier)};\n` : `require(${JSON.stringify(specifier)});\n`;
  return `${testText.slice(0, at)}${line}${testText.slice(at)}`;
}

interface ActivatorSpec {
  runner: PlanRunner;
  esm: boolean;
  /** Global the copy's state is handed over under, deleted before the copy's first test. */
  stateKey: string;
  hitLimit: number;
  /** File name (beside the activator) the copy writes its coverage to. */
  coverageName: string;
}

/**
 * The module a copy imports first: it creates the copy's counters and hands them to the copy's modules
 * through a global that it deletes before the first test runs (the modules keep them in a closure),
 * and registers an after-all hook that writes the coverage and fails the file when the hit limit
 * tripped (a test may have caught the error). Every copy's activator is the same text but for its
 * names: nothing in it says whether the copy runs a mutant, a decoy or the reference.
 */
export function activatorSource(spec: ActivatorSpec): string {
  const key = JSON.stringify(spec.stateKey);
  // node:test runs a root `before` hook while the test file's imports may still be loading: the global
  // goes at the first test instead (every import has loaded by then).
  const [before, after] =
    spec.runner === 'node:test' ? ['beforeEach', 'after'] : (['beforeAll', 'afterAll'] as const);
  const imports: string[] = [];
  if (spec.runner !== 'jest')
    imports.push(
      spec.esm
        ? `import { ${before}, ${after} } from '${spec.runner === 'vitest' ? 'vitest' : 'node:test'}';`
        : `const { ${before}, ${after} } = require('node:test');`,
    );
  const name = JSON.stringify(`./${spec.coverageName}`);
  // jest compiles ES syntax to CommonJS: __dirname, not import.meta.
  const esmWrite = spec.esm && spec.runner !== 'jest';
  imports.push(
    esmWrite
      ? `import { writeFileSync } from 'node:fs';\nimport { join as __vtJoin, dirname as __vtDirname } from 'node:path';\nimport { fileURLToPath as __vtPath } from 'node:url';`
      : `const { writeFileSync } = require('node:fs');`,
  );
  // Never the global URL: a jsdom or happy-dom test environment replaces it, and node:fs refuses theirs.
  const target = esmWrite
    ? `__vtJoin(__vtDirname(__vtPath(import.meta.url)), ${name})`
    : `require('node:path').join(__dirname, ${name})`;
  return [
    '// @ts-nocheck',
    '// vtnode mutation run: the counters of this copy of the test file (generated).',
    ...imports,
    `const s = { cov: Object.create(null), hits: 0, limit: ${spec.hitLimit}, tripped: false };`,
    `Object.defineProperty(globalThis, ${key}, { value: s, configurable: true });`,
    `${before}(() => {`,
    `  delete globalThis[${key}];`,
    '});',
    `${after}(() => {`,
    `  writeFileSync(${target}, JSON.stringify({ format: 'vtnode-mutation-coverage/1', hits: s.hits, tripped: s.tripped, cov: s.cov }));`,
    `  if (s.tripped) throw new Error('${HIT_LIMIT_MARKER}: the hit limit of ' + s.limit + ' was reached');`,
    '});',
    ...(spec.esm ? ['export {};'] : []),
    '',
  ].join('\n');
}

/** One copy of the test file: the mutant (or decoy) it runs, null for the reference; its edit; its tag. */
interface Run {
  id: string | null;
  edit: Mutant | null;
  tag: string;
}

/** Checks the options and returns the copies to make, in tag order (a salt-keyed, unguessable order). */
function runsOf(options: PlanOptions, runner: PlanRunner): { runs: Run[]; registry: Registry } {
  const files = new Set(options.sources.map((s) => s.path));
  const registry = options.registry ?? 'per-file';
  if (registry === 'shared' && runner !== 'vitest')
    throw new MutationPlanError(
      `a shared module registry is a vitest mode (--isolate=false), not one of ${runner}`,
    );
  const runs: Run[] = [];
  const edits = [...options.mutants, ...(options.decoys ?? [])];
  if (options.referenceEdit) edits.push(options.referenceEdit);
  for (const m of edits) {
    if (!files.has(m.file))
      throw new MutationPlanError(`mutant ${m.id} is in no source of the run (${m.file})`);
    const text = options.sources.find((x) => x.path === m.file)!.text;
    if (text.slice(m.start, m.end) !== m.original)
      throw new MutationPlanError(
        `mutant ${m.id} does not match ${m.file} at ${m.line}:${m.column} (stale mutant)`,
      );
  }
  for (const m of [...options.mutants, ...(options.decoys ?? [])])
    runs.push({ id: m.id, edit: m, tag: `vtnode-${tokenFor(m.id, options.salt)}` });
  runs.push({
    id: null,
    edit: options.referenceEdit ?? null,
    tag: `vtnode-${tokenFor('\0reference', options.salt)}`,
  });
  runs.sort((a, b) => (a.tag < b.tag ? -1 : 1));
  return { runs, registry };
}

/** Resolves relative specifiers among the given files only (no workspace to read). */
function knownFiles(files: { path: string; text: string }[]): ModuleAccess {
  const texts = new Map(files.map((f) => [f.path, f.text]));
  const exts = ['.ts', '.tsx', '.mts', '.cts', '.js', '.mjs', '.cjs', '.jsx'];
  return {
    read: (p) => texts.get(p) ?? null,
    resolve(spec, from) {
      if (!spec.startsWith('./') && !spec.startsWith('../')) return null;
      const base = posix.normalize(posix.join(posix.dirname(from), spec));
      const stem = base.replace(/\.[cm]?[jt]sx?$/, '');
      const tries = [base, ...exts.map((e) => stem + e), ...exts.map((e) => `${base}/index${e}`)];
      return tries.find((t) => texts.has(t)) ?? null;
    },
  };
}

/**
 * The overlay of one batched run. Per mutant, per decoy and for the reference, one copy of the judged
 * test file beside the original (so include globs still match) that imports first a tiny activator of
 * its own, and its own copy of each source and of each module between the test file and the sources,
 * named `<name>.vtnode-t<12 hex>.<ext>` beside the original (so their relative imports and file reads
 * still resolve) and with its specifiers pointing at the copy's files. Each copy's sources differ from
 * the originals in one edit: the mutant, the decoy (a no-op edit of the same form) or the reference's
 * own no-op edit. The sources' own paths hold a module that throws when loaded.
 */
export function planMutationRun(options: PlanOptions): MutationPlan {
  const runner = planRunner(options.runner);
  const { testFile } = options;
  const { runs, registry } = runsOf(options, runner);
  const esm = isEsm(testFile.text, testFile.path, runner);
  const ext = activatorExt(testFile.path);
  const graph = importGraph(testFile, options.sources, options.access ?? knownFiles(options.sources));
  const sources = new Set(options.sources.map((s) => s.path));
  const overlay: Record<string, string> = {};
  for (const f of graph.copied) if (sources.has(f)) overlay[f] = stubSource(f);
  const hitLimit = options.hitLimit ?? DEFAULT_HIT_LIMIT;
  const mutantOf = new Map<string, string | null>();
  let coverageFile = '';
  for (const r of runs) {
    const stateKey = `__vtnodeS_${r.tag.slice(-12)}`;
    for (const f of graph.copied)
      overlay[copyPath(f, r.tag)] = materialise(f, graph, sources, r.edit, {
        tag: r.tag,
        stateKey,
        hitLimit,
        runner,
      });
    const copy = taggedPath(testFile.path, r.tag);
    const activator = companionPath(testFile.path, r.tag, `.activate${ext}`);
    const coverage = companionPath(testFile.path, r.tag, '.coverage.json');
    const coverageName = posix.basename(coverage);
    overlay[activator] = activatorSource({ runner, esm, stateKey, hitLimit, coverageName });
    const rewritten = rewriteTest(testFile, graph, r.tag, copy, runner);
    const specifier = specifierFor(testFile.text, testFile.path, activator, runner);
    overlay[copy] = withActivator(rewritten, testFile.path, specifier, esm);
    if (options.snapshot != null) overlay[snapshotPathOf(copy)] = options.snapshot;
    mutantOf.set(copy, r.id);
    if (r.id === null) coverageFile = coverage;
  }
  return {
    runner,
    registry,
    overlay,
    testFiles: [...mutantOf.keys()],
    mutantOf,
    decoys: new Set((options.decoys ?? []).map((d) => d.id)),
    referenceFile: [...mutantOf].find(([, id]) => id === null)![0],
    originalFile: testFile.path,
    coverageFile,
    copied: [...graph.copied].sort(),
  };
}

/** What one mutant's copy of the test file did. */
export type MutantOutcome = 'killed' | 'survived' | 'hung' | 'missing';

export interface KillMatrix {
  /** Outcome per mutant id (decoys excluded). */
  outcomes: Map<string, MutantOutcome>;
  killed: string[];
  survived: string[];
  /** Stopped by the hit limit (an infinite loop, or far more work than the reference). */
  hung: string[];
  /** No case and no error of its copy in the verdict: the runner never ran it. */
  missing: string[];
  /** The reference copy (no mutant): all its counted cases passed, something failed, or it did not run. */
  reference: 'passed' | 'failed' | 'missing';
  /** The reference copy's cases, under the original test file's path (to compare inventories). */
  referenceCases: TestCase[];
  /** Decoys whose copy failed: the test file behaves differently when it merely runs under the harness. */
  decoysKilled: string[];
  /** Errors the verdict attributes to no copy (a crashed runner, a broken config). */
  unattributed: string[];
}

/** The outcome of one copy from its cases and file-level errors. */
function copyOutcome(cases: TestCase[], errors: string[]): MutantOutcome {
  if (cases.length === 0 && errors.length === 0) return 'missing';
  const messages = [...cases.map((c) => c.message ?? ''), ...errors];
  if (messages.some((m) => m.includes(HIT_LIMIT_MARKER))) return 'hung';
  if (errors.length > 0 || cases.some((c) => c.status === 'failed')) return 'killed';
  return 'survived';
}

/** Maps the per-file results of a batched run to kills per mutant. */
export function killMatrix(plan: MutationPlan, verdict: Verdict): KillMatrix {
  const files = [...plan.mutantOf.keys()];
  const errorsOf = new Map<string, string[]>(files.map((f) => [f, []]));
  const unattributed: string[] = [];
  for (const e of verdict.errors) {
    const file = files.find((f) => e.startsWith(`${f}: `));
    if (file) errorsOf.get(file)!.push(e);
    else unattributed.push(e);
  }
  const m: KillMatrix = {
    outcomes: new Map(),
    killed: [],
    survived: [],
    hung: [],
    missing: [],
    reference: 'missing',
    referenceCases: [],
    decoysKilled: [],
    unattributed,
  };
  for (const [file, id] of plan.mutantOf) {
    const cases = verdict.cases.filter((c) => c.file === file);
    const outcome = copyOutcome(cases, errorsOf.get(file)!);
    if (id === null) {
      m.reference = outcome === 'missing' ? 'missing' : outcome === 'survived' ? 'passed' : 'failed';
      m.referenceCases = cases.map((c) => ({ ...c, file: plan.originalFile }));
    } else if (plan.decoys.has(id)) {
      if (outcome !== 'survived') m.decoysKilled.push(id);
    } else {
      m.outcomes.set(id, outcome);
      m[outcome].push(id);
    }
  }
  return m;
}

/**
 * Decoys for a run: edits at the spans of `count` of the given expression mutants whose "replacement"
 * is the original text, chosen and named by the salt. A decoy's copy differs from the source exactly
 * as a mutant's does (the same wrapper at a mutation point), so only the behaviour of the code tells
 * them apart, and a decoy behaves as the original.
 */
export function makeDecoys(mutants: Mutant[], count: number, salt: string): Mutant[] {
  const hosts = mutants
    .filter((m) => m.kind === 'expression')
    .map((m) => ({ m, key: sha256Hex(`${salt}\0decoy\0${m.id}`) }))
    .sort((a, b) => (a.key < b.key ? -1 : 1))
    .slice(0, count);
  return hosts.map(({ m, key }) => ({ ...m, id: `d${key.slice(0, 12)}`, replacement: m.original }));
}

export interface PrepareOptions {
  runner: TestRunner;
  /** The sources to mutate (the task's `judge.mutate`): workspace-relative path and text. */
  sources: { path: string; text: string }[];
  testFile: { path: string; text: string };
  /** At most this many mutants over all sources (selectMutants). */
  max?: number;
  /** Secret of this run's tokens, names and decoys (a fresh random one per run in production). */
  salt?: string;
  /** Decoy copies (default 2). */
  decoys?: number;
  hitLimit?: number;
  /** Finds and reads the workspace modules between the test file and the sources. */
  access?: ModuleAccess;
  snapshot?: string | null;
  /** `auto`: `shared` for vitest when no source keeps module state (moduleState), else `per-file` (default). */
  registry?: Registry | 'auto';
}

/** Everything a batched run needs, from the sources: enumerate, select, add decoys, plan the copies. */
export function prepareMutationRun(options: PrepareOptions): {
  plan: MutationPlan;
  mutants: Mutant[];
  enumerated: number;
} {
  const salt = options.salt ?? '';
  const registry: Registry =
    options.registry === 'auto'
      ? options.runner === 'vitest' && options.sources.every((s) => moduleState(s.text, s.path).length === 0)
        ? 'shared'
        : 'per-file'
      : (options.registry ?? 'per-file');
  const all = options.sources.flatMap((s) => enumerateMutants(s.text, s.path));
  // A shared registry leaves module-level mutants out as it always did: each copy now loads its own copy
  // of the sources, so they could run, but the selection (and so every answer key) stays as it was.
  const runnable = registry === 'shared' ? all.filter((m) => m.fn !== '<module>') : all;
  const mutants = selectMutants(runnable, options.max !== undefined ? { max: options.max } : {});
  // One more no-op edit than decoys: the reference copy's, so every copy differs from the sources in one place.
  const noops = makeDecoys(mutants, (options.decoys ?? 2) + 1, salt);
  const referenceEdit = noops.length > (options.decoys ?? 2) ? noops.pop()! : null;
  const plan = planMutationRun({
    runner: options.runner,
    sources: options.sources,
    testFile: options.testFile,
    mutants,
    decoys: noops,
    referenceEdit,
    salt,
    ...(options.access ? { access: options.access } : {}),
    ...(options.hitLimit !== undefined ? { hitLimit: options.hitLimit } : {}),
    ...(options.snapshot !== undefined ? { snapshot: options.snapshot } : {}),
    registry,
  });
  return { plan, mutants, enumerated: all.length };
}
