import ts from 'typescript';

/** One import-like reference of a file: `import`, `export ... from`, `import()`, `require()`. */
export interface ImportRef {
  /** The module specifier as written. */
  specifier: string;
  /**
   * Names taken from the module, by their name IN that module: `default`, a named export, or `*` for a
   * namespace import, `export * as ns`, a dynamic `import()` or a `require()`. Empty for a side-effect
   * import and for `export * from` (which passes names through without using them).
   */
  names: string[];
  /** True for `import type` / `export type` (erased at runtime). */
  typeOnly: boolean;
  /** For `export ... from`: pairs [name exported here, name in the source module] (`*` for `export *`). */
  reexports?: [string, string][];
}

/** A name one file takes from another: the import's specifier and the name in that module (`*`: all of it). */
export interface ImportedName {
  specifier: string;
  name: string;
}

/** What the miner needs to know about one TS/JS file, read with the TypeScript parser (no type-checking). */
export interface ParsedFile {
  /** Workspace-relative POSIX path. */
  path: string;
  /** Full text. */
  text: string;
  /** Every import-like reference, in source order. */
  imports: ImportRef[];
  /** Names this file exports from its own declarations (`default` for a default export). */
  exports: string[];
  /** Every top-level declared name (exported or not), in source order. */
  declarations: string[];
  /** True when the file declares nothing and only re-exports other files (a barrel). */
  barrel: boolean;
  /** Exported name -> the local declaration it exports, where the two differ (`export { a as b }`, `default`). */
  localExports: Record<string, string>;
  /**
   * True for a file tests import to reach others: it re-exports, or it is an `index` file. Its
   * wrappers' callees are followed (`uses`, `effects`); those of other files are not.
   */
  facade: boolean;
  /**
   * Facades only: local top-level declaration -> the imported names its code refers to (`export const
   * hsl = useMode(modeHsl)` uses `useMode` and `modeHsl`), through other local declarations too.
   */
  uses: Record<string, ImportedName[]>;
  /** Facades only: imported names top-level code that declares nothing refers to (it runs on load). */
  effects: ImportedName[];
  /** True when the code uses timers (setTimeout, fake timers, system time, node:timers, mock.timers). */
  usesTimers: boolean;
}

/** A file the parser could not read: the first syntax error, with its position. */
export interface ParseFailure {
  path: string;
  error: string;
}

/** Identifiers that mean a file relies on timers or the clock. */
const TIMER_NAMES = new Set([
  'setTimeout',
  'setInterval',
  'setImmediate',
  'useFakeTimers',
  'advanceTimersByTime',
  'advanceTimersByTimeAsync',
  'advanceTimersToNextTimer',
  'runAllTimers',
  'runAllTimersAsync',
  'runOnlyPendingTimers',
  'setSystemTime',
]);
/** An `index` file: the entry of a folder, a facade even when it declares everything itself. */
const INDEX_FILE = /^index\.[cm]?[jt]sx?$/;
const TIMER_MODULES = new Set(['timers', 'node:timers', 'timers/promises', 'node:timers/promises']);

function scriptKind(path: string): ts.ScriptKind {
  if (path.endsWith('.tsx')) return ts.ScriptKind.TSX;
  if (path.endsWith('.jsx')) return ts.ScriptKind.JSX;
  if (/\.[cm]?ts$/.test(path)) return ts.ScriptKind.TS;
  return ts.ScriptKind.JS;
}

function hasModifier(node: ts.Node, kind: ts.SyntaxKind): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node)?.some((m) => m.kind === kind) ?? false);
}

function bindingNames(name: ts.BindingName, out: string[]): void {
  if (ts.isIdentifier(name)) out.push(name.text);
  else
    for (const el of name.elements) {
      if (!ts.isOmittedExpression(el)) bindingNames(el.name, out);
    }
}

/** `module.exports`, or the X of `exports.X` / `module.exports.X`. */
function exportsTarget(node: ts.Expression): { whole: boolean; name?: string } | null {
  if (!ts.isPropertyAccessExpression(node)) return null;
  const obj = node.expression;
  if (ts.isIdentifier(obj) && obj.text === 'module' && node.name.text === 'exports') return { whole: true };
  if (ts.isIdentifier(obj) && obj.text === 'exports') return { whole: false, name: node.name.text };
  if (exportsTarget(obj)?.whole) return { whole: false, name: node.name.text };
  return null;
}

/** Names a CommonJS assignment exports: `exports.a = `, `module.exports = { a, b }`, `module.exports = f`. */
function commonJsExports(expr: ts.Expression): string[] {
  if (!ts.isBinaryExpression(expr) || expr.operatorToken.kind !== ts.SyntaxKind.EqualsToken) return [];
  const target = exportsTarget(expr.left);
  if (!target) return [];
  if (!target.whole) return target.name ? [target.name] : [];
  const right = expr.right;
  if (!ts.isObjectLiteralExpression(right)) return ['default'];
  const names: string[] = [];
  for (const p of right.properties)
    if (p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) names.push(p.name.text);
  return names;
}

/** True for an identifier that names a property (`a.x`, `{ x: 1 }`), not a binding in scope. */
function isPropertyName(id: ts.Identifier): boolean {
  const p = id.parent;
  return (
    (ts.isPropertyAccessExpression(p) && p.name === id) ||
    (ts.isPropertyAssignment(p) && p.name === id) ||
    (ts.isMethodDeclaration(p) && p.name === id) ||
    (ts.isPropertyDeclaration(p) && p.name === id)
  );
}

function moduleName(node: ts.Expression | undefined): string | null {
  return node && ts.isStringLiteralLike(node) ? node.text : null;
}

/**
 * The members a namespace binding is used for (`_.map`, `R['add']`, the type `ns.T`), or null when it
 * escapes (passed as a value, spread, re-exported, indexed by a computed key): then it may use every export.
 */
function namespaceMembers(sf: ts.SourceFile, local: string, declaration: ts.Identifier): string[] | null {
  const names = new Set<string>();
  let escapes = false;
  const walk = (n: ts.Node): void => {
    if (escapes) return;
    if (ts.isIdentifier(n) && n.text === local && n !== declaration && !isPropertyName(n)) {
      const p = n.parent;
      // Another binding of the same name (`(_, i) => i`) declares, it does not use: its own uses, if
      // any, read as uses of the namespace (never fewer names than the file takes).
      const declares =
        (ts.isParameter(p) ||
          ts.isVariableDeclaration(p) ||
          ts.isBindingElement(p) ||
          ts.isFunctionDeclaration(p) ||
          ts.isClassDeclaration(p)) &&
        p.name === n;
      if (declares) {
        // not a use
      } else if (ts.isPropertyAccessExpression(p) && p.expression === n) names.add(p.name.text);
      else if (
        ts.isElementAccessExpression(p) &&
        p.expression === n &&
        ts.isStringLiteralLike(p.argumentExpression)
      )
        names.add(p.argumentExpression.text);
      else if (ts.isQualifiedName(p) && p.left === n) names.add(p.right.text);
      else escapes = true;
    }
    ts.forEachChild(n, walk);
  };
  walk(sf);
  return escapes ? null : [...names];
}

/** Parses `text` as the file at `path`; a syntax error gives a ParseFailure naming line and column. */
export function parseFile(path: string, text: string): ParsedFile | ParseFailure {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, scriptKind(path));
  const diagnostics =
    (sf as unknown as { parseDiagnostics?: ts.DiagnosticWithLocation[] }).parseDiagnostics ?? [];
  const first = diagnostics[0];
  if (first) {
    const { line, character } = sf.getLineAndCharacterOfPosition(first.start);
    return {
      path,
      error: `syntax error at ${line + 1}:${character + 1}: ${ts.flattenDiagnosticMessageText(first.messageText, ' ')}`,
    };
  }

  const imports: ImportRef[] = [];
  const exports: string[] = [];
  const declarations: string[] = [];
  let declaresSomething = false;
  let reexportsSomething = false;

  // Local name -> what it imports, so `export { x }` of an imported x is a re-export, and the names a
  // declaration's code refers to can be followed into the files that define them.
  const bindings = new Map<string, { ref: ImportRef; name: string }>();
  // Namespace bindings (`import * as _`, `import R = require()`, `const R = require()`): narrowed to
  // the members the file uses once it is read.
  const namespaces: { ref: ImportRef; id: ts.Identifier }[] = [];
  const localExports: Record<string, string> = {};
  const localExportList: [string, string][] = [];
  const declStatements: [string[], ts.Node][] = [];
  const effectStatements: ts.Node[] = [];

  const declare = (names: string[], exported: boolean, isDefault = false) => {
    declaresSomething = true;
    declarations.push(...names);
    if (exported) exports.push(...(isDefault ? ['default'] : names));
  };

  for (const stmt of sf.statements) {
    const exported = hasModifier(stmt, ts.SyntaxKind.ExportKeyword);
    const isDefault = hasModifier(stmt, ts.SyntaxKind.DefaultKeyword);
    if (ts.isImportDeclaration(stmt)) {
      const spec = moduleName(stmt.moduleSpecifier);
      if (spec === null) continue;
      const clause = stmt.importClause;
      // A side-effect import (`import './x'`) takes no names: it only runs the module.
      const ref: ImportRef = { specifier: spec, names: [], typeOnly: false };
      const nb = clause?.namedBindings;
      if (clause?.name) {
        ref.names.push('default');
        bindings.set(clause.name.text, { ref, name: 'default' });
      }
      if (nb && ts.isNamespaceImport(nb)) {
        ref.names.push('*');
        bindings.set(nb.name.text, { ref, name: '*' });
        namespaces.push({ ref, id: nb.name });
      } else if (nb)
        for (const el of nb.elements) {
          const name = (el.propertyName ?? el.name).text;
          ref.names.push(name);
          if (!el.isTypeOnly) bindings.set(el.name.text, { ref, name });
        }
      ref.typeOnly =
        clause?.isTypeOnly === true ||
        (clause !== undefined &&
          !clause.name &&
          nb !== undefined &&
          ts.isNamedImports(nb) &&
          nb.elements.length > 0 &&
          nb.elements.every((e) => e.isTypeOnly));
      imports.push(ref);
    } else if (ts.isImportEqualsDeclaration(stmt)) {
      if (ts.isExternalModuleReference(stmt.moduleReference)) {
        const spec = moduleName(stmt.moduleReference.expression);
        if (spec !== null) {
          const ref: ImportRef = { specifier: spec, names: ['*'], typeOnly: stmt.isTypeOnly };
          imports.push(ref);
          bindings.set(stmt.name.text, { ref, name: '*' });
          namespaces.push({ ref, id: stmt.name });
          if (exported) localExportList.push([stmt.name.text, stmt.name.text]);
          continue;
        }
      }
      declare([stmt.name.text], exported);
    } else if (ts.isExportDeclaration(stmt)) {
      const spec = moduleName(stmt.moduleSpecifier);
      const clause = stmt.exportClause;
      if (spec !== null) {
        reexportsSomething = true;
        const pairs: [string, string][] = [];
        if (!clause) pairs.push(['*', '*']);
        else if (ts.isNamespaceExport(clause)) pairs.push([clause.name.text, '*']);
        else for (const el of clause.elements) pairs.push([el.name.text, (el.propertyName ?? el.name).text]);
        // `export * from` uses no name by itself; consumers' imports are followed through it.
        imports.push({
          specifier: spec,
          names: [...new Set(pairs.filter(([as]) => as !== '*').map(([, from]) => from))],
          typeOnly: stmt.isTypeOnly,
          reexports: pairs,
        });
      } else if (clause && ts.isNamedExports(clause)) {
        // `export { a, b as c }`: of local declarations, or of imported names (then a re-export).
        for (const el of clause.elements)
          localExportList.push([el.name.text, (el.propertyName ?? el.name).text]);
      }
    } else if (ts.isExportAssignment(stmt)) {
      if (ts.isIdentifier(stmt.expression)) localExportList.push(['default', stmt.expression.text]);
      else {
        declaresSomething = true;
        exports.push('default');
        localExports['default'] = 'default';
        declStatements.push([['default'], stmt]);
      }
    } else if (ts.isVariableStatement(stmt)) {
      const names: string[] = [];
      for (const d of stmt.declarationList.declarations) bindingNames(d.name, names);
      declare(names, exported);
      declStatements.push([names, stmt]);
    } else if (
      ts.isFunctionDeclaration(stmt) ||
      ts.isClassDeclaration(stmt) ||
      ts.isInterfaceDeclaration(stmt) ||
      ts.isTypeAliasDeclaration(stmt) ||
      ts.isEnumDeclaration(stmt) ||
      ts.isModuleDeclaration(stmt)
    ) {
      const name = stmt.name && ts.isIdentifier(stmt.name) ? stmt.name.text : isDefault ? 'default' : null;
      if (name === null) continue;
      // `export default function f` declares f and exports `default`.
      declare([name], exported, isDefault);
      if (isDefault) localExports['default'] = name;
      declStatements.push([[name], stmt]);
    } else {
      // expression statements, etc.: code that runs, so the file is not a pure barrel
      if (!ts.isEmptyStatement(stmt)) {
        declaresSomething = true;
        effectStatements.push(stmt);
      }
      if (ts.isExpressionStatement(stmt)) exports.push(...commonJsExports(stmt.expression));
    }
  }

  // `export { x as y }` / `export default x` of an imported x passes the import through: a re-export.
  for (const [as, local] of localExportList) {
    const bound = bindings.get(local);
    if (bound) {
      reexportsSomething = true;
      bound.ref.reexports = [...(bound.ref.reexports ?? []), [as, bound.name]];
    } else {
      exports.push(as);
      if (as !== local) localExports[as] = local;
    }
  }
  const facade = reexportsSomething || INDEX_FILE.test(path.slice(path.lastIndexOf('/') + 1));
  // What each top-level declaration's code refers to: imported names, and other local declarations
  // (whose own references count too: `labOf` calling the wrapper `lab` reaches what `lab` calls).
  const localNames = new Set(declStatements.flatMap(([names]) => names));
  const referencesIn = (node: ts.Node): { imported: ImportedName[]; locals: string[] } => {
    const imported = new Map<string, ImportedName>();
    const locals = new Set<string>();
    const walk = (n: ts.Node): void => {
      if (ts.isIdentifier(n) && !isPropertyName(n)) {
        const bound = bindings.get(n.text);
        if (bound && !bound.ref.typeOnly)
          imported.set(`${bound.ref.specifier}\0${bound.name}`, {
            specifier: bound.ref.specifier,
            name: bound.name,
          });
        else if (localNames.has(n.text)) locals.add(n.text);
      }
      ts.forEachChild(n, walk);
    };
    walk(node);
    return { imported: [...imported.values()], locals: [...locals] };
  };
  const direct = new Map<string, { imported: ImportedName[]; locals: string[] }>();
  for (const [names, node] of facade ? declStatements : []) {
    const refs = referencesIn(node);
    for (const n of names) direct.set(n, refs);
  }
  const usesOf = (name: string): ImportedName[] => {
    const found = new Map<string, ImportedName>();
    const seen = new Set<string>();
    const visit = (n: string) => {
      if (seen.has(n)) return;
      seen.add(n);
      const refs = direct.get(n);
      for (const i of refs?.imported ?? []) found.set(`${i.specifier}\0${i.name}`, i);
      for (const l of refs?.locals ?? []) visit(l);
    };
    visit(name);
    return [...found.values()];
  };
  const uses: Record<string, ImportedName[]> = {};
  for (const name of facade ? direct.keys() : []) {
    const used = usesOf(name);
    if (used.length > 0) uses[name] = used;
  }
  const importedNamesIn = (node: ts.Node): ImportedName[] => {
    const refs = referencesIn(node);
    return [...refs.imported, ...refs.locals.flatMap(usesOf)];
  };
  const effects = facade ? effectStatements.flatMap(importedNamesIn) : [];

  // Dynamic import(), require() and timer use anywhere in the file (identifiers, not text in strings).
  let usesTimers = false;
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node)) {
      if (TIMER_NAMES.has(node.text)) usesTimers = true;
      // node:test's `mock.timers`
      else if (
        node.text === 'timers' &&
        ts.isPropertyAccessExpression(node.parent) &&
        node.parent.name === node &&
        ts.isIdentifier(node.parent.expression) &&
        node.parent.expression.text === 'mock'
      )
        usesTimers = true;
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const isImport = callee.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require' && node.arguments.length === 1;
      if (isImport || isRequire) {
        const spec = moduleName(node.arguments[0]);
        // `const { a, b: c } = require('./x')` (or `= await import('./x')`) takes a and b; `const R =
        // require('./x')` what R is used for; anything else may use every export.
        const awaited = isImport && ts.isAwaitExpression(node.parent) ? node.parent : node;
        const parent = awaited.parent;
        let names = ['*'];
        if (
          ts.isVariableDeclaration(parent) &&
          parent.initializer === awaited &&
          ts.isObjectBindingPattern(parent.name) &&
          parent.name.elements.every((e) => !e.dotDotDotToken)
        )
          names = parent.name.elements.map((e) =>
            e.propertyName && ts.isIdentifier(e.propertyName)
              ? e.propertyName.text
              : ts.isIdentifier(e.name)
                ? e.name.text
                : '*',
          );
        if (spec !== null) {
          const ref: ImportRef = { specifier: spec, names, typeOnly: false };
          imports.push(ref);
          if (
            ts.isVariableDeclaration(parent) &&
            parent.initializer === awaited &&
            ts.isIdentifier(parent.name)
          )
            namespaces.push({ ref, id: parent.name });
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  ts.forEachChild(sf, visit);
  if (imports.some((i) => TIMER_MODULES.has(i.specifier))) usesTimers = true;
  for (const { ref, id } of namespaces) {
    const members = namespaceMembers(sf, id.text, id);
    if (members && members.length > 0)
      ref.names = [...new Set([...ref.names.filter((n) => n !== '*'), ...members])];
  }

  return {
    path,
    text,
    imports,
    exports: [...new Set(exports)],
    declarations: [...new Set(declarations)],
    barrel: reexportsSomething && !declaresSomething,
    usesTimers,
    localExports,
    facade,
    uses,
    effects,
  };
}

/** Narrows a parse result. */
export function isParseFailure(r: ParsedFile | ParseFailure): r is ParseFailure {
  return 'error' in r;
}
