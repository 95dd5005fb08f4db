// Per-copy materialised sources: every copy of the judged test file (mutant, decoy, reference) gets
// its own files of the sources under test, and of every workspace module on its import path to them,
// each an ordinary program with at most one edit. Nothing at run time says which copy is a mutant: no
// switch, no global, no shared instrumented text (see docs/mutation.md, "Copies").
import { posix } from 'node:path';
import ts from 'typescript';
import { extensionOf, isDeclarationFile, isTypeScript, parseSource } from './ast.ts';
import type { Mutant } from './mutants.ts';
import { type Edit, HIT_LIMIT_MARKER, helperNames, probeEdits, renderEdits } from './schemata.ts';

/** How the workspace's modules are found and read (the strength judge gives the real workspace). */
export interface ModuleAccess {
  /** Workspace-relative file a specifier names from `from`, or null (a package, a missing file). */
  resolve(spec: string, from: string): string | null;
  /** Text of a workspace file, or null when it cannot be read. */
  read(path: string): string | null;
}

/** A string-literal module specifier in a file: its literal's span (quotes included) and its text. */
export interface SpecifierRef {
  start: number;
  end: number;
  spec: string;
}

/** Calls whose first argument names a module: the runners' mocking and `requireActual` families. */
const MODULE_METHODS = new Set([
  'mock',
  'doMock',
  'unmock',
  'doUnmock',
  'importActual',
  'importMock',
  'requireActual',
  'requireMock',
  'createMockFromModule',
  'setMock',
  'dontMock',
  'resolve',
]);

/**
 * The module specifiers a file names with string literals: imports and re-exports (type-only ones
 * too), `import()`, `require()`, and the first argument of `vi.mock`, `jest.requireActual` and the like.
 */
export function specifierRefs(text: string, path: string): SpecifierRef[] {
  const sf = parseSource(text, path);
  const out: SpecifierRef[] = [];
  const add = (lit: ts.Node | undefined) => {
    if (lit && ts.isStringLiteralLike(lit))
      out.push({ start: lit.getStart(sf), end: lit.end, spec: lit.text });
  };
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) add(n.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(n) && ts.isExternalModuleReference(n.moduleReference))
      add(n.moduleReference.expression);
    else if (ts.isCallExpression(n)) {
      const callee = n.expression;
      const named =
        callee.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(callee) && callee.text === 'require') ||
        (ts.isPropertyAccessExpression(callee) && MODULE_METHODS.has(callee.name.text));
      if (named) add(n.arguments[0]);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

const RUNTIME_SOURCE = /\.(?:[cm]?[jt]sx?)$/;

/** True for workspace files a copy may hold: JavaScript or TypeScript code outside node_modules. */
const isCode = (path: string): boolean =>
  RUNTIME_SOURCE.test(path) && !isDeclarationFile(path) && !path.split('/').includes('node_modules');

/** The import graph from a test file: each file's specifiers and the workspace file each names. */
export interface ImportGraph {
  /** File → its specifier refs that resolve to a code file of the workspace, with that file. */
  edges: Map<string, { ref: SpecifierRef; to: string }[]>;
  /** Files (the test file excluded) from which a source is reachable, sources included: copied per copy. */
  copied: Set<string>;
  /** Texts of the copied files. */
  texts: Map<string, string>;
}

/** Most files the graph walk reads (a test file of a large package imports a few dozen). */
const MAX_GRAPH = 400;

/**
 * Walks the workspace modules a test file reaches by specifiers, and keeps those from which one of
 * the sources is reachable: each copy of the test file gets its own copy of them.
 */
export function importGraph(
  test: { path: string; text: string },
  sources: { path: string; text: string }[],
  access: ModuleAccess,
): ImportGraph {
  const known = new Map(sources.map((s) => [s.path, s.text]));
  known.set(test.path, test.text);
  const edges = new Map<string, { ref: SpecifierRef; to: string }[]>();
  const queue = [test.path];
  while (queue.length > 0 && edges.size < MAX_GRAPH) {
    const file = queue.shift()!;
    if (edges.has(file)) continue;
    const text = known.get(file) ?? access.read(file);
    if (text === null || text === undefined) continue;
    known.set(file, text);
    const out: { ref: SpecifierRef; to: string }[] = [];
    for (const ref of specifierRefs(text, file)) {
      const to = access.resolve(ref.spec, file);
      if (to === null || !isCode(to)) continue;
      out.push({ ref, to });
      if (!edges.has(to)) queue.push(to);
    }
    edges.set(file, out);
  }
  // Backwards from the sources: every file with a path to one of them.
  const importers = new Map<string, string[]>();
  for (const [from, out] of edges)
    for (const { to } of out) importers.set(to, [...(importers.get(to) ?? []), from]);
  const copied = new Set<string>();
  const back = sources.map((s) => s.path).filter((p) => edges.has(p));
  while (back.length > 0) {
    const f = back.pop()!;
    if (copied.has(f) || f === test.path) continue;
    copied.add(f);
    back.push(...(importers.get(f) ?? []));
  }
  const texts = new Map([...copied].map((f) => [f, known.get(f)!]));
  return { edges, copied, texts };
}

/** `dir/name.ext` + tag → `dir/name.<tag>.ext` (the last extension kept: `.d.ts`-free code files only). */
export function copyPath(path: string, tag: string): string {
  const ext = extensionOf(path);
  return `${path.slice(0, -ext.length)}.${tag}${ext}`;
}

/** The runners a copy is written for (sandbox/mutation/plan.ts PlanRunner). */
export type CopyRunner = 'vitest' | 'jest' | 'node:test';

/**
 * The specifier that names `target` (a copy) from `from`, in the style of the specifier it replaces:
 * with the real extension, with `.js` for a TypeScript file, or with none. A bare specifier (a package's
 * self-reference, a path alias) says nothing of the style: node's ES module loader (node:test) needs the
 * real file name, and so does any runner for a JavaScript file; jest resolves a TypeScript one without
 * its extension (which ts-jest would refuse), and vitest either way.
 */
export function specifierFor(original: string, from: string, target: string, runner: CopyRunner): string {
  let rel = posix.relative(posix.dirname(from), target);
  if (!rel.startsWith('.')) rel = `./${rel}`;
  const ext = extensionOf(target);
  const bare = !original.startsWith('.') && !original.startsWith('/');
  if (bare) return runner !== 'jest' || !isTypeScript(target) ? rel : rel.slice(0, -ext.length);
  const m = /\.([cm]?[jt]sx?)$/.exec(original);
  if (!m) return rel.slice(0, -ext.length);
  return `${rel.slice(0, -ext.length)}.${m[1]}`;
}

/** Specifier replacements of `file` for one copy: every edge to a copied file points at its copy. */
function specifierEdits(
  file: string,
  graph: ImportGraph,
  tag: string,
  selfCopy: string,
  runner: CopyRunner,
): Edit[] {
  const out: Edit[] = [];
  for (const { ref, to } of graph.edges.get(file) ?? []) {
    if (!graph.copied.has(to)) continue;
    out.push({
      start: ref.start,
      end: ref.end,
      before: '',
      after: '',
      replace: JSON.stringify(specifierFor(ref.spec, selfCopy, copyPath(to, tag), runner)),
      rank: 9,
      asi: false,
    });
  }
  return out;
}

/** The edit one mutant (or decoy) makes in its copy: the replacement itself, no switch. */
function mutationEdit(m: Mutant, typed: boolean, asi: Set<number>): Edit {
  if (m.kind !== 'expression')
    // An emptied body returns undefined, as the schemata's early return does; an emptied block does nothing.
    return { start: m.start, end: m.end, before: '', after: '', replace: '', rank: 1, asi: false };
  // `as never` keeps the static type of the original expression (ts-jest type-checks importers).
  const replace = typed ? `((${m.replacement}) as never)` : `(${m.replacement})`;
  return { start: m.start, end: m.end, before: '', after: '', replace, rank: 3, asi: asi.has(m.start) };
}

/**
 * The run-time helpers of a copy: coverage counters and the hit limit on a state object the copy's
 * activator hands over through a global that it deletes before the first test runs (modules loaded
 * later keep a private state of their own). The limit applies to every copy alike, the reference too.
 */
function copyRuntime(h: ReturnType<typeof helperNames>, file: string, key: string, limit: number): string {
  const k = JSON.stringify(key);
  const f = JSON.stringify(file);
  return [
    '',
    '// vtnode mutation copy: coverage counters and hit limit (generated).',
    `function ${h.S}() {`,
    `  return (${h.S}.s ??= globalThis[${k}] ?? { cov: Object.create(null), hits: 0, limit: ${limit}, tripped: false });`,
    '}',
    `${h.S}();`,
    `function ${h.E}(k) {`,
    `  const s = ${h.S}();`,
    `  const c = s.cov[${f}] ?? (s.cov[${f}] = Object.create(null));`,
    '  c[k] = (c[k] ?? 0) + 1;',
    `  ${h.H}(s);`,
    '}',
    `function ${h.L}() {`,
    `  ${h.H}(${h.S}());`,
    '}',
    `function ${h.H}(s) {`,
    '  if (++s.hits > s.limit) {',
    '    s.tripped = true;',
    `    throw new Error('${HIT_LIMIT_MARKER}: more than ' + s.limit + ' loop iterations and calls');`,
    '  }',
    '}',
    '',
  ].join('\n');
}

export interface CopyOptions {
  /** The copy's tag (`vtnode-t<12 hex>`): its files' names. */
  tag: string;
  /** Global the copy's activator puts its state under until its tests start. */
  stateKey: string;
  hitLimit: number;
  /** The runner the copy is run by: how its specifiers are written (specifierFor). */
  runner: CopyRunner;
}

/**
 * One copied module of one copy: a source gets the probes (function entries, loop iterations) and,
 * when `edit` is in it, that one edit; any other module only its specifiers rewritten.
 */
export function materialise(
  file: string,
  graph: ImportGraph,
  sources: Set<string>,
  edit: Mutant | null,
  options: CopyOptions,
): string {
  const text = graph.texts.get(file)!;
  const self = copyPath(file, options.tag);
  const specs = specifierEdits(file, graph, options.tag, self, options.runner);
  if (!sources.has(file)) return renderEdits(text, specs);
  const sf = parseSource(text, file);
  const h = helperNames(text);
  const { edits, asi } = probeEdits(sf, h);
  if (edit && edit.file === file) edits.push(mutationEdit(edit, isTypeScript(file), asi));
  const shebang = /^#![^\n]*\n?/.exec(text)?.[0] ?? '';
  const body = renderEdits(text, [...edits, ...specs]).slice(shebang.length);
  const tail = body.endsWith('\n') ? '' : '\n';
  return `${shebang}// @ts-nocheck\n${body}${tail}${copyRuntime(h, file, options.stateKey, options.hitLimit)}`;
}

/**
 * What stands at a source's own path during the run: a module that throws when loaded, so that no test
 * can load the unmutated code by a path built at run time and compare its copy with it.
 */
export function stubSource(path: string): string {
  return `// @ts-nocheck\nthrow new Error(${JSON.stringify(`${path} cannot be loaded during the mutation run: import it by a specifier written in the test file`)});\n`;
}

/** The judged test file with its specifiers pointing at one copy's files. */
export function rewriteTest(
  test: { path: string; text: string },
  graph: ImportGraph,
  tag: string,
  copy: string,
  runner: CopyRunner,
): string {
  return renderEdits(test.text, specifierEdits(test.path, graph, tag, copy, runner));
}
