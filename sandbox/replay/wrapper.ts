import { basename, extname, posix } from 'node:path';
import ts from 'typescript';

/** The target's own value exports, read from its syntax (types and re-exports of other modules left out). */
export interface TargetExports {
  /** Exports re-exported through the recorder (functions, classes, consts, enums, `default`). */
  wrapped: string[];
  /** `let`/`var` exports: registered as handles but left to the live `export *` binding. */
  live: string[];
}

const has = (node: ts.Node, kind: ts.SyntaxKind) =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === kind);

function bindingNames(name: ts.BindingName, out: string[]): void {
  if (ts.isIdentifier(name)) out.push(name.text);
  else for (const e of name.elements) if (!ts.isOmittedExpression(e)) bindingNames(e.name, out);
}

/** The value exports of a module's source text, from its syntax alone. */
export function targetExports(text: string, fileName: string): TargetExports {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  const wrapped: string[] = [];
  const live: string[] = [];
  for (const s of sf.statements) {
    if (ts.isExportAssignment(s)) {
      if (!s.isExportEquals) wrapped.push('default');
      continue;
    }
    if (ts.isExportDeclaration(s)) {
      if (s.moduleSpecifier || s.isTypeOnly || !s.exportClause || !ts.isNamedExports(s.exportClause))
        continue;
      for (const e of s.exportClause.elements) if (!e.isTypeOnly) wrapped.push(e.name.text);
      continue;
    }
    if (!has(s, ts.SyntaxKind.ExportKeyword) || has(s, ts.SyntaxKind.DeclareKeyword)) continue;
    const name = has(s, ts.SyntaxKind.DefaultKeyword) ? 'default' : undefined;
    if (ts.isFunctionDeclaration(s) || ts.isClassDeclaration(s)) {
      const n = name ?? s.name?.text;
      if (n) wrapped.push(n);
    } else if (ts.isEnumDeclaration(s) && !has(s, ts.SyntaxKind.ConstKeyword)) wrapped.push(s.name.text);
    else if (ts.isModuleDeclaration(s) && ts.isIdentifier(s.name)) wrapped.push(s.name.text);
    else if (ts.isVariableStatement(s)) {
      const names: string[] = [];
      for (const d of s.declarationList.declarations) bindingNames(d.name, names);
      const isConst = (s.declarationList.flags & ts.NodeFlags.Const) !== 0;
      (isConst ? wrapped : live).push(...names);
    }
  }
  return { wrapped: [...new Set(wrapped)], live: [...new Set(live)] };
}

/**
 * The modules the target's own code imports or re-exports (type-only imports included), by specifier as
 * written: the replay imports them too, so that instances of their classes can be passed in again.
 */
export function targetImports(text: string, fileName: string): string[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  for (const s of sf.statements) {
    // Type-only imports too: a class the target names only as a type still types what tests pass in.
    if (ts.isImportDeclaration(s) && ts.isStringLiteral(s.moduleSpecifier)) out.push(s.moduleSpecifier.text);
    if (
      ts.isExportDeclaration(s) &&
      !s.isTypeOnly &&
      s.moduleSpecifier &&
      ts.isStringLiteral(s.moduleSpecifier)
    )
      out.push(s.moduleSpecifier.text);
  }
  return [...new Set(out)];
}

/** Box-relative path of the module, next to the target, that imports what the target imports. */
export function importsPath(target: string): string {
  const ext = extname(target);
  return `${target.slice(0, target.length - ext.length)}.vtnode-imports${ext}`;
}

/** A module the replay imports: its key in recordings (a box-relative path, or the specifier as written). */
export interface ImportedModule {
  key: string;
  /** The specifier that imports it from the target's folder. */
  spec: string;
}

/** The imports module (importsPath()): `export const modules = { [key]: namespace }`. */
export function importsModule(modules: ImportedModule[]): string {
  const lines = ['// Written by vtnode: the modules the target imports, for the differential replay.'];
  for (const [i, m] of modules.entries())
    lines.push(`import * as __vtnodeM${i} from ${JSON.stringify(m.spec)};`);
  lines.push(
    `export const modules = { ${modules.map((m, i) => `${JSON.stringify(m.key)}: __vtnodeM${i}`).join(', ')} };`,
    '',
  );
  return lines.join('\n');
}

/** Extensions of modules the recorder can wrap (ES modules through the runner's transform). */
const WRAPPABLE = /\.(?:[mc]?ts|tsx|m?js|jsx)$/;

/**
 * The box-relative file a relative specifier imported from `from` names, when `exists` finds it
 * (with its extension, `.js` standing for `.ts`, or an index file); null for bare specifiers, aliases
 * and files outside the workspace.
 */
export function resolveRelative(from: string, spec: string, exists: (rel: string) => boolean): string | null {
  if (!spec.startsWith('./') && !spec.startsWith('../')) return null;
  const base = posix.normalize(posix.join(posix.dirname(from), spec.split('?')[0]!));
  if (base.startsWith('../') || base === '..') return null;
  const tries = [
    base,
    base.replace(/\.(m|c)?js$/, '.$1ts'),
    ...['.ts', '.tsx', '.js', '.mjs', '/index.ts', '/index.js'].map((e) => `${base}${e}`),
  ];
  return tries.find((t) => WRAPPABLE.test(t) && exists(t)) ?? null;
}

/** tsconfig `paths` (with `baseUrl`, box-relative): pattern → replacements, one `*` each at most. */
export type PathAliases = { pattern: string; to: string[] }[];

/** The `paths` of a workspace's tsconfig.json (its own, `extends` not followed), or none. */
export function readPathAliases(tsconfigText: string | null): PathAliases {
  if (!tsconfigText) return [];
  const parsed = ts.parseConfigFileTextToJson('tsconfig.json', tsconfigText).config as
    | { compilerOptions?: { baseUrl?: string; paths?: Record<string, string[]> } }
    | undefined;
  const base = parsed?.compilerOptions?.baseUrl ?? '.';
  return Object.entries(parsed?.compilerOptions?.paths ?? {}).map(([pattern, to]) => ({
    pattern,
    to: (Array.isArray(to) ? to : []).map((t) => posix.normalize(posix.join(base, t))),
  }));
}

/** A specifier through the aliases: the box-relative paths it may name. */
function unalias(spec: string, aliases: PathAliases): string[] {
  const out: string[] = [];
  for (const a of aliases) {
    const star = a.pattern.indexOf('*');
    if (star < 0) {
      if (spec === a.pattern) out.push(...a.to);
      continue;
    }
    const [pre, post] = [a.pattern.slice(0, star), a.pattern.slice(star + 1)];
    if (spec.startsWith(pre) && spec.endsWith(post) && spec.length >= pre.length + post.length) {
      const mid = spec.slice(pre.length, spec.length - post.length);
      out.push(...a.to.map((t) => t.replace('*', mid)));
    }
  }
  return out;
}

/** The box-relative file a specifier names: relative, or through the workspace's path aliases. */
export function resolveSpecifier(
  from: string,
  spec: string,
  exists: (rel: string) => boolean,
  aliases: PathAliases,
): string | null {
  const direct = resolveRelative(from, spec, exists);
  if (direct) return direct;
  for (const p of unalias(spec, aliases)) {
    const hit = resolveRelative('x', `./${p}`, exists);
    if (hit) return hit;
  }
  return null;
}

/** The modules a module re-exports from (`export * from`, `export { a } from`), type-only left out. */
export function reexports(text: string, fileName: string): string[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  return sf.statements.flatMap((s) =>
    ts.isExportDeclaration(s) && !s.isTypeOnly && s.moduleSpecifier && ts.isStringLiteral(s.moduleSpecifier)
      ? [s.moduleSpecifier.text]
      : [],
  );
}

/** The modules an import list names, keyed by their box path when it resolves (else by specifier). */
export function importedModules(
  from: string,
  target: string,
  specs: string[],
  exists: (rel: string) => boolean,
  aliases: PathAliases = [],
): ImportedModule[] {
  return specs.map((spec) => {
    const file = resolveSpecifier(from, spec, exists, aliases);
    return file ? { key: file, spec: fromFile(target, file) } : { key: spec, spec };
  });
}

/** Box-relative path the reference is moved to in a recording box (same folder: its imports still resolve). */
export function realPath(target: string): string {
  const ext = extname(target);
  return `${target.slice(0, target.length - ext.length)}.vtnode-real${ext}`;
}

/** Box-relative folder of the replay's runtime modules, scripts and outputs. */
export const RUNTIME_DIR = '.vtnode-replay';

/** An import specifier for box-relative `to` from the module at box-relative `from`. */
export function fromFile(from: string, to: string): string {
  const rel = posix.relative(posix.dirname(from), to);
  return rel.startsWith('.') ? rel : `./${rel}`;
}

const IDENT = /^[A-Za-z_$][\w$]*$/;
const exportName = (n: string) => (IDENT.test(n) ? n : JSON.stringify(n));

export interface WrapperOptions {
  /** Box-relative path of the module wrapped (the target, or a module the tests import). */
  target: string;
  /** The module's key in recordings: '' for the target, its box path for another module. */
  owner: string;
  /** Box path of the imports module (the target's wrapper only), or null. */
  imports: string | null;
  /** The target's exports (targetExports()). */
  exports: TargetExports;
  /** Box-relative paths of the judged test files, in the task's order. */
  testFiles: string[];
}

/**
 * The module written at a wrapped module's path in a recording box: it re-exports the module (moved to
 * realPath()) with its functions and classes passed through the recorder.
 */
export function recorderWrapper(o: WrapperOptions): string {
  const real = JSON.stringify(`./${basename(realPath(o.target))}`);
  const lines = [
    '// Written by vtnode: the recording wrapper of the differential replay (sandbox/replay/).',
    `import * as __vtnodeReal from ${real};`,
    `import { createRecorder as __vtnodeRecorder } from ${JSON.stringify(fromFile(o.target, `${RUNTIME_DIR}/record.mjs`))};`,
    ...(o.imports
      ? [`import { modules as __vtnodeModules } from ${JSON.stringify(fromFile(o.target, o.imports))};`]
      : []),
    `const __vtnodeRec = __vtnodeRecorder(${JSON.stringify({ testFiles: o.testFiles, owner: o.owner })}${o.imports ? ', () => __vtnodeModules' : ''});`,
    `export * from ${real};`,
  ];
  o.exports.wrapped.forEach((name, i) => {
    lines.push(
      `const __vtnodeW${i} = __vtnodeRec.wrap(${JSON.stringify(name)}, __vtnodeReal[${JSON.stringify(name)}]);`,
    );
    lines.push(`export { __vtnodeW${i} as ${exportName(name)} };`);
  });
  for (const name of o.exports.live)
    lines.push(`__vtnodeRec.register(${JSON.stringify(name)}, __vtnodeReal[${JSON.stringify(name)}]);`);
  return `${lines.join('\n')}\n`;
}
