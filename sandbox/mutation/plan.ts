import { posix } from 'node:path';
import ts from 'typescript';
import { z } from 'zod';
import { sha256Hex } from '../../protocol/canonical.ts';
import type { TestRunner } from '../../protocol/task.ts';
import type { TestCase, Verdict } from '../judges/verdict.ts';
import { extensionOf, isTypeScript, parseSource } from './ast.ts';
import { enumerateMutants, type Mutant } from './mutants.ts';
import {
  DEFAULT_HIT_LIMIT,
  DEFAULT_STATE_KEY,
  HIT_LIMIT_MARKER,
  instrument,
  type Schemata,
} from './schemata.ts';
import { selectMutants } from './select.ts';

/** Runners whose test files each get a fresh module registry, which the batched run relies on. */
export type PlanRunner = 'vitest' | 'jest' | 'node:test';

/** The plan cannot be made for this runner or input. */
export class MutationPlanError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MutationPlanError';
  }
}

/** One instrumented source of the run. */
export interface PlanTarget {
  /** Workspace-relative path the schemata is written over. */
  path: string;
  schemata: Schemata;
}

export interface PlanOptions {
  runner: TestRunner;
  /** The sources under test, instrumented (every mutant and decoy below must have a token in one). */
  targets: PlanTarget[];
  /** The judged test file: workspace-relative path and the text to judge (the original or a candidate). */
  testFile: { path: string; text: string };
  /** The mutants to run, one copy of the test file each. */
  mutants: Mutant[];
  /** Decoys: switch points that change nothing; a test file that "kills" one detects the harness. */
  decoys?: Mutant[];
  /** Hit limit each copy sets (default DEFAULT_HIT_LIMIT). */
  hitLimit?: number;
  /** Text of the test file's snapshot file (`__snapshots__/<name>.snap`), copied beside each copy. */
  snapshot?: string | null;
  /** `per-file` (default): each copy gets a fresh module registry; `shared`: vitest `--isolate=false` (see Registry). */
  registry?: Registry;
}

/**
 * How the copies' modules are loaded. `per-file`: each copy gets a fresh module registry (vitest's
 * default isolation, jest always, node:test's process per file), so even module-level code runs
 * under the copy's mutant. `shared` (vitest `--isolate=false`, about 6× less CPU per copy): every
 * module is loaded once per worker, by the first copy, with no mutant active: module-level mutants
 * are left out, code that runs while a module loads is never mutated, and state a module keeps
 * (caches, registries) is shared by the copies, which is why it is meant for stateless targets
 * (moduleState) only.
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

/** The specifiers of the modules a test file imports at run time (type-only imports left out). */
function runtimeImports(text: string, path: string): string[] {
  const out: string[] = [];
  for (const st of parseSource(text, path).statements) {
    if (ts.isImportDeclaration(st) && st.importClause?.isTypeOnly) continue;
    if (ts.isExportDeclaration(st) && st.isTypeOnly) continue;
    if (
      (ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) &&
      st.moduleSpecifier &&
      ts.isStringLiteral(st.moduleSpecifier)
    )
      out.push(st.moduleSpecifier.text);
  }
  return [...new Set(out)];
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
  stateKey: string;
  token: string | null;
  hitLimit: number;
  /** File name (beside the activator) the reference copy writes its coverage to. */
  coverageName: string | null;
  /** Shared registry: modules imported (for their first load, with no mutant active) before the switch is set. */
  preload?: string[];
  /** Only create the state and switch every mutant off (the reset module of a shared registry). */
  bare?: boolean;
}

/**
 * The module a copy imports first: it sets the active mutant and resets the counters before the
 * target loads, and registers an after-all hook that fails the file when the hit limit tripped (a
 * test may have caught the error) and, in the reference copy, writes the coverage.
 */
export function activatorSource(spec: ActivatorSpec): string {
  const key = JSON.stringify(spec.stateKey);
  const state = `const s = globalThis[${key}] ?? (globalThis[${key}] = { active: null, cov: Object.create(null), hits: 0, limit: 0, tripped: false });`;
  if (spec.bare)
    return [
      '// @ts-nocheck',
      '// vtnode mutation run: no mutant active while modules first load (generated).',
      state,
      's.active = null;',
      ...(spec.esm ? ['export {};'] : []),
      '',
    ].join('\n');
  const hook = spec.runner === 'vitest' ? 'afterAll' : spec.runner === 'node:test' ? 'after' : 'afterAll';
  const imports: string[] = [];
  if (spec.runner !== 'jest')
    imports.push(
      spec.esm
        ? `import { ${hook} } from '${spec.runner === 'vitest' ? 'vitest' : 'node:test'}';`
        : `const { ${hook} } = require('node:test');`,
    );
  let write = '';
  if (spec.coverageName !== null) {
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
    write = `  writeFileSync(${target}, JSON.stringify({ format: 'vtnode-mutation-coverage/1', hits: s.hits, tripped: s.tripped, cov: s.cov }));\n`;
  }
  // ES imports run before this module's body: the reset module and then the preloads load first.
  const preload = (spec.preload ?? []).map((p) => `import ${JSON.stringify(p)};`);
  return [
    '// @ts-nocheck',
    '// vtnode mutation run: switches the mutant of this copy of the test file (generated).',
    ...preload,
    ...imports,
    state,
    `s.active = ${JSON.stringify(spec.token)};`,
    's.cov = Object.create(null);',
    's.hits = 0;',
    `s.limit = ${spec.hitLimit};`,
    's.tripped = false;',
    `${hook}(() => {`,
    write +
      `  if (s.tripped) throw new Error('${HIT_LIMIT_MARKER}: the hit limit of ' + s.limit + ' was reached under mutant ' + s.active);`,
    '});',
    ...(spec.esm ? ['export {};'] : []),
    '',
  ].join('\n');
}

/** One copy of the test file: the mutant (or decoy) it runs under, its token and its name tag. */
interface Run {
  id: string | null;
  token: string | null;
  tag: string;
}

/** Checks the options and returns the copies to make, in tag order (a salt-keyed, unguessable order). */
function runsOf(
  options: PlanOptions,
  runner: PlanRunner,
): { runs: Run[]; stateKey: string; registry: Registry } {
  const tokens = new Map<string, string>();
  for (const t of options.targets)
    for (const [id, tok] of Object.entries(t.schemata.tokens)) tokens.set(id, tok);
  const stateKey = options.targets[0]?.schemata.stateKey ?? DEFAULT_STATE_KEY;
  if (options.targets.some((t) => t.schemata.stateKey !== stateKey))
    throw new MutationPlanError('the targets were instrumented with different state keys');
  const registry = options.registry ?? 'per-file';
  if (registry === 'shared') {
    if (runner !== 'vitest')
      throw new MutationPlanError(
        `a shared module registry is a vitest mode (--isolate=false), not one of ${runner}`,
      );
    const top = options.mutants.find((m) => m.fn === '<module>');
    if (top)
      throw new MutationPlanError(
        `mutant ${top.id} is module-level code, which a shared registry runs only once`,
      );
  }
  const runs: Run[] = [];
  for (const m of [...options.mutants, ...(options.decoys ?? [])]) {
    const token = tokens.get(m.id);
    if (!token) throw new MutationPlanError(`mutant ${m.id} is in no target's schemata`);
    runs.push({ id: m.id, token, tag: `vtnode-${token}` });
  }
  // The reference copy's tag comes from the same salt-keyed hash as the others.
  const refTag = `vtnode-t${sha256Hex(`${[...tokens.values()].sort().join(',')}\0reference`).slice(0, 12)}`;
  runs.push({ id: null, token: null, tag: refTag });
  runs.sort((a, b) => (a.tag < b.tag ? -1 : 1));
  return { runs, stateKey, registry };
}

/**
 * The overlay of one batched run: the schemata over each target, and per mutant, per decoy and for
 * the reference one copy of the judged test file beside the original (so relative imports and include
 * globs still match), each importing first a tiny activator of its own. Every file a copy adds is
 * named with a token derived from the schemata salt, so names say nothing about which mutant runs.
 */
export function planMutationRun(options: PlanOptions): MutationPlan {
  const runner = planRunner(options.runner);
  const { testFile } = options;
  const { runs, stateKey, registry } = runsOf(options, runner);
  const esm = isEsm(testFile.text, testFile.path, runner);
  const ext = activatorExt(testFile.path);
  const overlay: Record<string, string> = {};
  for (const t of options.targets) overlay[t.path] = t.schemata.text;
  const base = { runner, esm, stateKey };
  const preload: string[] = [];
  if (registry === 'shared') {
    const reset = companionPath(
      testFile.path,
      `vtnode-r${runs.find((r) => r.id === null)!.tag.slice(-12)}`,
      ext,
    );
    overlay[reset] = activatorSource({ ...base, token: null, hitLimit: 0, coverageName: null, bare: true });
    preload.push(
      specifierFor(testFile.text, testFile.path, reset, runner),
      ...runtimeImports(testFile.text, testFile.path),
    );
  }
  const mutantOf = new Map<string, string | null>();
  let coverageFile = '';
  for (const r of runs) {
    const copy = taggedPath(testFile.path, r.tag);
    const activator = companionPath(testFile.path, r.tag, `.activate${ext}`);
    const coverage = r.id === null ? companionPath(testFile.path, r.tag, '.coverage.json') : null;
    const hitLimit = options.hitLimit ?? DEFAULT_HIT_LIMIT;
    const coverageName = coverage === null ? null : posix.basename(coverage);
    overlay[activator] = activatorSource({ ...base, token: r.token, hitLimit, coverageName, preload });
    const specifier = specifierFor(testFile.text, testFile.path, activator, runner);
    overlay[copy] = withActivator(testFile.text, testFile.path, specifier, esm);
    if (options.snapshot != null) overlay[snapshotPathOf(copy)] = options.snapshot;
    mutantOf.set(copy, r.id);
    if (coverage !== null) coverageFile = coverage;
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
 * Decoys for a run: switch points at the spans of `count` of the given expression mutants whose
 * "replacement" is the original text, chosen and named by the salt (so they cannot be told from
 * mutants by position, name or token; only by comparing the two branches of the switch).
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
  /** Secret of this run's tokens and decoys (a fresh random one per run in production). */
  salt?: string;
  /** Decoy copies (default 2). */
  decoys?: number;
  hitLimit?: number;
  stateKey?: string;
  snapshot?: string | null;
  /** `auto`: `shared` for vitest when no source keeps module state (moduleState), else `per-file` (default). */
  registry?: Registry | 'auto';
}

/** Everything a batched run needs, from the sources: enumerate, select, add decoys, instrument, plan. */
export function prepareMutationRun(options: PrepareOptions): {
  plan: MutationPlan;
  mutants: Mutant[];
  enumerated: number;
  schemata: Schemata[];
} {
  const salt = options.salt ?? '';
  const registry: Registry =
    options.registry === 'auto'
      ? options.runner === 'vitest' && options.sources.every((s) => moduleState(s.text, s.path).length === 0)
        ? 'shared'
        : 'per-file'
      : (options.registry ?? 'per-file');
  const all = options.sources.flatMap((s) => enumerateMutants(s.text, s.path));
  // A shared registry runs module-level code once, with no mutant active: its mutants cannot run.
  const runnable = registry === 'shared' ? all.filter((m) => m.fn !== '<module>') : all;
  const mutants = selectMutants(runnable, options.max !== undefined ? { max: options.max } : {});
  const decoys = makeDecoys(mutants, options.decoys ?? 2, salt);
  const schemata = options.sources.map((s) =>
    instrument(
      s.text,
      s.path,
      [...mutants, ...decoys].filter((m) => m.file === s.path),
      {
        salt,
        ...(options.stateKey !== undefined ? { stateKey: options.stateKey } : {}),
        ...(options.hitLimit !== undefined ? { hitLimit: options.hitLimit } : {}),
      },
    ),
  );
  const plan = planMutationRun({
    runner: options.runner,
    targets: schemata.map((s) => ({ path: s.file, schemata: s })),
    testFile: options.testFile,
    mutants,
    decoys,
    ...(options.hitLimit !== undefined ? { hitLimit: options.hitLimit } : {}),
    ...(options.snapshot !== undefined ? { snapshot: options.snapshot } : {}),
    registry,
  });
  return { plan, mutants, enumerated: all.length, schemata };
}
