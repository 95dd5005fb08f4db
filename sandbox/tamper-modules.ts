import { isBuiltin } from 'node:module';
import ts from 'typescript';

/**
 * What a file loads, however it spells the load, and which loads an allow-list admits: the module half
 * of the static tamper rules (sandbox/tamper.ts). A load is a static import or re-export, `import x =
 * require()`, `import()`, `require()` or an alias of it, `createRequire(…)(…)`, `getBuiltinModule()`,
 * a module loader's internals (`Module._load`), a runner's module loaders (`vi.importActual`,
 * `jest.requireActual`) and `import.meta.glob`. Its specifier is folded from string constants where it
 * can be (`'node:' + 'vm'`, a `const` holding one); otherwise the load is computed.
 */

/**
 * Builtins a candidate may load whatever the original loads: pure computation and read-only host facts.
 * None of them reaches the file system, the module loader, processes, threads, the engine, the inspector,
 * the network, stdio or the process object (a candidate reaches those only through a builtin listed here
 * when it is handed one, e.g. `once(process, …)`: the process rules see that).
 */
export const PURE_BUILTINS: ReadonlySet<string> = new Set([
  'buffer',
  'crypto',
  'events',
  'os',
  'path',
  'perf_hooks',
  'punycode',
  'querystring',
  'stream',
  'string_decoder',
  'timers',
  'url',
  'util',
  'zlib',
]);

/** Call names that load the module their first argument names (on any object: aliases included). */
const LOADER_CALLS = new Set([
  'require',
  'getBuiltinModule',
  '_load',
  'importActual',
  'importMock',
  'requireActual',
  'requireMock',
]);

/** Where a load's key points: the allow-list compares keys. */
export type ModuleKey = string;

/** One load site of a file. */
export interface ModuleLoad {
  node: ts.Node;
  /** The specifier as written when it is a literal, '[]' when it is an expression. */
  literal: string;
  /** The specifier folded from constants, or null when it cannot be. */
  folded: string | null;
}

/** `a/b/c` → `a`, `@s/p/x` → `@s/p`. */
function packageName(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** A test file, a fixture or a snapshot: what a source module has no business loading. */
const TEST_PATH =
  /(?:^|\/)(?:__tests__|__mocks__|__fixtures__|__snapshots__|tests?|specs?|fixtures?)(?:\/|$)|\.(?:test|spec|test-d)\.[cm]?[jt]sx?$|\.snap$/;

/**
 * The allow-list key of a specifier: `node:<builtin>` by its first segment (`fs/promises` is `node:fs`),
 * `pkg:<name>` (a scoped package by its scope, so a tsconfig alias such as `@app/x` and its siblings
 * compare equal), `local` for a workspace module, and `exact:<spec>` for what must match the original's
 * text: absolute paths, URLs (`data:`, `file:`), query suffixes (`?raw`), and, for a source module, a
 * test file or fixture.
 */
export function moduleKey(spec: string, role: 'source' | 'tests'): ModuleKey {
  if (/[?#]/.test(spec.replace(/^#/, '')) || /^[a-z][a-z0-9+.-]*:/i.test(spec.replace(/^node:/, '')))
    return `exact:${spec}`;
  if (spec.startsWith('node:') || isBuiltin(spec)) return `node:${spec.replace(/^node:/, '').split('/')[0]}`;
  const inModules = spec.match(/(?:^|\/)node_modules\/(.+)$/);
  if (inModules) return moduleKey(inModules[1]!, role);
  if (spec.startsWith('/') || spec.startsWith('\\')) return `exact:${spec}`;
  if (spec.startsWith('.') || spec.startsWith('#')) {
    return role === 'source' && TEST_PATH.test(spec) ? `exact:${spec}` : 'local';
  }
  const name = packageName(spec);
  return `pkg:${name.startsWith('@') ? name.split('/')[0] : name}`;
}

/**
 * Does the allow-list admit a load without the original making it? Workspace modules and pure builtins;
 * for a test file also its runner's modules (`vitest`, `node:test`, `node:assert`: globals written as
 * imports). The runner's internals are a rule of their own.
 */
export function admitted(
  key: ModuleKey,
  spec: string,
  role: 'source' | 'tests',
  runnerModule: (spec: string) => boolean,
): boolean {
  if (key === 'local') return true;
  if (key.startsWith('node:') && PURE_BUILTINS.has(key.slice(5))) return true;
  return role === 'tests' && !key.startsWith('exact:') && runnerModule(spec);
}

/** String constants of a file: `const x = 'a' + 'b'` (a name declared twice is not a constant). */
export function stringConstants(sf: ts.SourceFile): Map<string, string | null> {
  const out = new Map<string, string | null>();
  const visit = (node: ts.Node): void => {
    if (
      ts.isVariableDeclaration(node) &&
      ts.isIdentifier(node.name) &&
      node.initializer &&
      ts.isVariableDeclarationList(node.parent) &&
      node.parent.flags & ts.NodeFlags.Const
    ) {
      const v = foldString(node.initializer, out);
      out.set(node.name.text, out.has(node.name.text) && out.get(node.name.text) !== v ? null : v);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** A string expression's value when literals and constants decide it, else null. */
export function foldString(e: ts.Expression, consts: Map<string, string | null>): string | null {
  let x = e;
  while (ts.isParenthesizedExpression(x) || ts.isAsExpression(x) || ts.isSatisfiesExpression(x))
    x = x.expression;
  if (ts.isStringLiteralLike(x)) return x.text;
  if (ts.isIdentifier(x)) return consts.get(x.text) ?? null;
  if (ts.isTemplateExpression(x)) {
    let out = x.head.text;
    for (const span of x.templateSpans) {
      const v = foldString(span.expression, consts);
      if (v === null) return null;
      out += v + span.literal.text;
    }
    return out;
  }
  if (ts.isBinaryExpression(x) && x.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    const a = foldString(x.left, consts);
    const b = a === null ? null : foldString(x.right, consts);
    return a === null || b === null ? null : a + b;
  }
  return null;
}

/** Unwraps parentheses, type assertions and comma sequences (`(0, eval)` is `eval`). */
export function stripParens(e: ts.Expression): ts.Expression {
  let x = e;
  for (;;) {
    if (
      ts.isParenthesizedExpression(x) ||
      ts.isAsExpression(x) ||
      ts.isNonNullExpression(x) ||
      ts.isSatisfiesExpression(x)
    )
      x = x.expression;
    else if (ts.isBinaryExpression(x) && x.operatorToken.kind === ts.SyntaxKind.CommaToken) x = x.right;
    else return x;
  }
}

/** The name a callee ends in: `require`, `m.require`, `m['_load']`, `g` for an identifier. */
function calleeName(callee: ts.Expression): string | null {
  if (ts.isIdentifier(callee)) return callee.text;
  if (ts.isPropertyAccessExpression(callee)) return callee.name.text;
  if (ts.isElementAccessExpression(callee) && ts.isStringLiteralLike(stripParens(callee.argumentExpression)))
    return (stripParens(callee.argumentExpression) as ts.StringLiteralLike).text;
  return null;
}

/** Names bound to a loader: `const r = require`, `const r = createRequire(…)`, `const { getBuiltinModule: g } = process`. */
export function loaderAliases(sf: ts.SourceFile): Set<string> {
  const out = new Set<string>();
  const isLoader = (e: ts.Expression): boolean => {
    const x = stripParens(e);
    if (ts.isCallExpression(x)) return calleeName(stripParens(x.expression)) === 'createRequire';
    const name = calleeName(x);
    return name !== null && (LOADER_CALLS.has(name) || out.has(name));
  };
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && node.initializer) {
      if (ts.isIdentifier(node.name) && isLoader(node.initializer)) out.add(node.name.text);
      if (ts.isObjectBindingPattern(node.name))
        for (const el of node.name.elements) {
          const key = el.propertyName && ts.isIdentifier(el.propertyName) ? el.propertyName.text : null;
          if (ts.isIdentifier(el.name) && LOADER_CALLS.has(key ?? el.name.text)) out.add(el.name.text);
        }
    }
    if (
      ts.isBinaryExpression(node) &&
      node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
      ts.isIdentifier(node.left) &&
      isLoader(node.right)
    )
      out.add(node.left.text);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** Is this declaration erased at compile time (`import type`, `export type`, every binding a type)? */
function typeOnly(node: ts.ImportDeclaration | ts.ExportDeclaration | ts.ImportEqualsDeclaration): boolean {
  if (ts.isImportEqualsDeclaration(node)) return node.isTypeOnly;
  if (ts.isExportDeclaration(node)) {
    const c = node.exportClause;
    return (
      node.isTypeOnly ||
      (!!c && ts.isNamedExports(c) && c.elements.length > 0 && c.elements.every((e) => e.isTypeOnly))
    );
  }
  const c = node.importClause;
  if (!c) return false;
  if (c.isTypeOnly) return true;
  const b = c.namedBindings;
  return (
    !c.name && !!b && ts.isNamedImports(b) && b.elements.length > 0 && b.elements.every((e) => e.isTypeOnly)
  );
}

function specifierOf(
  e: ts.Expression | undefined,
  consts: Map<string, string | null>,
): Omit<ModuleLoad, 'node'> {
  if (!e) return { literal: '[]', folded: null };
  const x = stripParens(e);
  if (ts.isStringLiteralLike(x)) return { literal: x.text, folded: x.text };
  return { literal: '[]', folded: foldString(x, consts) };
}

/**
 * The load a node makes, or null. `loaders` are the file's loader aliases; `freeRequire` says whether
 * `require` is the module system's (not a name the file declares).
 */
export function loadAt(
  node: ts.Node,
  consts: Map<string, string | null>,
  loaders: Set<string>,
  freeRequire: boolean,
): ModuleLoad | null {
  if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier)
    return typeOnly(node) ? null : { node, ...specifierOf(node.moduleSpecifier, consts) };
  if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference))
    return typeOnly(node) ? null : { node, ...specifierOf(node.moduleReference.expression, consts) };
  if (!ts.isCallExpression(node)) return null;
  const callee = stripParens(node.expression);
  if (callee.kind === ts.SyntaxKind.ImportKeyword) return { node, ...specifierOf(node.arguments[0], consts) };
  // `import.meta.glob('../test/*.ts', { query: '?raw' })`: vite loads what a pattern matches.
  if (
    ts.isPropertyAccessExpression(callee) &&
    ts.isMetaProperty(callee.expression) &&
    /^glob/.test(callee.name.text)
  )
    return { node, literal: '[]', folded: null };
  const name = calleeName(callee);
  const viaCreateRequire =
    ts.isCallExpression(callee) && calleeName(stripParens(callee.expression)) === 'createRequire';
  const isLoad =
    viaCreateRequire ||
    (name !== null &&
      (ts.isIdentifier(callee)
        ? (name === 'require' && freeRequire) || loaders.has(name)
        : LOADER_CALLS.has(name) || loaders.has(name)));
  return isLoad ? { node, ...specifierOf(node.arguments[0], consts) } : null;
}
