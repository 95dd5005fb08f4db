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

/** The imports module (importsPath()): `export const modules = { [specifier]: namespace }`. */
export function importsModule(specifiers: string[]): string {
  const lines = ['// Written by vtnode: the modules the target imports, for the differential replay.'];
  for (const [i, s] of specifiers.entries())
    lines.push(`import * as __vtnodeM${i} from ${JSON.stringify(s)};`);
  lines.push(
    `export const modules = { ${specifiers.map((s, i) => `${JSON.stringify(s)}: __vtnodeM${i}`).join(', ')} };`,
    '',
  );
  return lines.join('\n');
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
  /** Box-relative path of the target. */
  target: string;
  /** The target's exports (targetExports()). */
  exports: TargetExports;
  /** Box-relative paths of the judged test files, in the task's order. */
  testFiles: string[];
}

/**
 * The module written at the target's path in a recording box: it re-exports the reference (moved to
 * realPath()) with its functions and classes passed through the recorder.
 */
export function recorderWrapper(o: WrapperOptions): string {
  const real = JSON.stringify(`./${basename(realPath(o.target))}`);
  const lines = [
    '// Written by vtnode: the recording wrapper of the differential replay (sandbox/replay/).',
    `import * as __vtnodeReal from ${real};`,
    `import { createRecorder as __vtnodeRecorder } from ${JSON.stringify(fromFile(o.target, `${RUNTIME_DIR}/record.mjs`))};`,
    `import { modules as __vtnodeModules } from ${JSON.stringify(fromFile(o.target, importsPath(o.target)))};`,
    `const __vtnodeRec = __vtnodeRecorder(${JSON.stringify({ testFiles: o.testFiles })}, __vtnodeModules);`,
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
