import ts from 'typescript';

/** Extension → how TypeScript parses the file (every extension a JS/TS runner executes). Built on first
 * use: an idle node does not load TypeScript (the package bundle loads it lazily). */
let scriptKinds: Record<string, ts.ScriptKind> | undefined;
const SCRIPT_KINDS = (): Record<string, ts.ScriptKind> =>
  (scriptKinds ??= {
    '.ts': ts.ScriptKind.TS,
    '.mts': ts.ScriptKind.TS,
    '.cts': ts.ScriptKind.TS,
    '.tsx': ts.ScriptKind.TSX,
    '.js': ts.ScriptKind.JS,
    '.mjs': ts.ScriptKind.JS,
    '.cjs': ts.ScriptKind.JS,
    '.jsx': ts.ScriptKind.JSX,
  });

/** The extension of a path as TypeScript sees it (`.d.ts` counts as a declaration file). */
export function extensionOf(fileName: string): string {
  const m = /(\.d)?\.([cm]?[jt]sx?)$/.exec(fileName);
  if (!m)
    throw new Error(
      `${fileName}: not a JavaScript or TypeScript source (.ts .tsx .mts .cts .js .jsx .mjs .cjs)`,
    );
  return m[1] ? `.d.${m[2]}` : `.${m[2]}`;
}

/** True for files whose syntax admits type assertions (`x as never`). */
export function isTypeScript(fileName: string): boolean {
  const kind = SCRIPT_KINDS()[extensionOf(fileName)];
  return kind === ts.ScriptKind.TS || kind === ts.ScriptKind.TSX;
}

/** True for `.d.ts`-style declaration files: they hold no runtime code. */
export function isDeclarationFile(fileName: string): boolean {
  return extensionOf(fileName).startsWith('.d.');
}

/** Parses a source with parent pointers set (the walkers below rely on them). */
export function parseSource(text: string, fileName: string): ts.SourceFile {
  const ext = extensionOf(fileName);
  const kind = SCRIPT_KINDS()[ext.replace(/^\.d/, '')] ?? ts.ScriptKind.TS;
  return ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
}

/** Syntax errors of a text, as TypeScript's parser reports them (empty when it parses). */
export function syntaxErrors(text: string, fileName: string): string[] {
  const sf = parseSource(text, fileName) as ts.SourceFile & { parseDiagnostics?: ts.Diagnostic[] };
  return (sf.parseDiagnostics ?? []).map((d) => {
    const { line, character } = sf.getLineAndCharacterOfPosition(d.start ?? 0);
    return `${line + 1}:${character + 1} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

const hasModifier = (node: ts.Node, kind: ts.SyntaxKind): boolean =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === kind);

/**
 * Nodes whose subtree holds no code that runs, or code whose text must not change: types and
 * type-only declarations, `declare`d code, imports and exports with their specifiers, decorators,
 * `extends`/`implements` clauses, enums (their initialisers must stay constant expressions for
 * `const enum` and isolated-module transpilers), overload signatures and abstract members.
 */
export function isOutsideRuntime(node: ts.Node): boolean {
  if (ts.isTypeNode(node)) return true;
  switch (node.kind) {
    case ts.SyntaxKind.InterfaceDeclaration:
    case ts.SyntaxKind.TypeAliasDeclaration:
    case ts.SyntaxKind.EnumDeclaration:
    case ts.SyntaxKind.ImportDeclaration:
    case ts.SyntaxKind.ImportEqualsDeclaration:
    case ts.SyntaxKind.ExportDeclaration:
    case ts.SyntaxKind.NamespaceExportDeclaration:
    case ts.SyntaxKind.Decorator:
    case ts.SyntaxKind.HeritageClause:
    case ts.SyntaxKind.TypeParameter:
    case ts.SyntaxKind.IndexSignature:
    case ts.SyntaxKind.MetaProperty:
      return true;
  }
  if (hasModifier(node, ts.SyntaxKind.DeclareKeyword) || hasModifier(node, ts.SyntaxKind.AbstractKeyword))
    return true;
  if (ts.isFunctionLike(node) && !ts.isArrowFunction(node) && !('body' in node && node.body)) return true;
  return false;
}

/** A function-like node with a body: what gets an entry counter and names mutants. */
export type FunctionWithBody =
  | ts.FunctionDeclaration
  | ts.FunctionExpression
  | ts.ArrowFunction
  | ts.MethodDeclaration
  | ts.ConstructorDeclaration
  | ts.GetAccessorDeclaration
  | ts.SetAccessorDeclaration;

export function isFunctionWithBody(node: ts.Node): node is FunctionWithBody {
  return (
    (ts.isFunctionDeclaration(node) ||
      ts.isFunctionExpression(node) ||
      ts.isArrowFunction(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessorDeclaration(node) ||
      ts.isSetAccessorDeclaration(node)) &&
    node.body !== undefined
  );
}

function propertyNameText(name: ts.PropertyName | undefined, sf: ts.SourceFile): string | null {
  if (!name) return null;
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name)) return name.text;
  if (ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  const { line } = sf.getLineAndCharacterOfPosition(name.getStart(sf));
  return `<computed:${line + 1}>`;
}

/** The name of the class (or object) that owns a member, for `Owner.member` keys. */
function ownerName(owner: ts.Node, sf: ts.SourceFile): string {
  if ((ts.isClassDeclaration(owner) || ts.isClassExpression(owner)) && owner.name) return owner.name.text;
  if (ts.isClassDeclaration(owner)) return 'default';
  const holder = owner.parent;
  if (holder && ts.isVariableDeclaration(holder) && ts.isIdentifier(holder.name)) return holder.name.text;
  if (holder && ts.isPropertyAssignment(holder)) return propertyNameText(holder.name, sf) ?? '<object>';
  return ts.isObjectLiteralExpression(owner) ? '<object>' : '<class>';
}

/** The own name of a function-like node, or null when it is anonymous (a callback). */
export function ownName(fn: FunctionWithBody, sf: ts.SourceFile): string | null {
  if (ts.isFunctionDeclaration(fn)) return fn.name?.text ?? 'default';
  if (ts.isConstructorDeclaration(fn)) return `${ownerName(fn.parent, sf)}.constructor`;
  if (ts.isMethodDeclaration(fn) || ts.isGetAccessorDeclaration(fn) || ts.isSetAccessorDeclaration(fn)) {
    const prefix = ts.isGetAccessorDeclaration(fn) ? 'get ' : ts.isSetAccessorDeclaration(fn) ? 'set ' : '';
    return `${prefix}${ownerName(fn.parent, sf)}.${propertyNameText(fn.name, sf)}`;
  }
  if (ts.isFunctionExpression(fn) && fn.name) return fn.name.text;
  const p = fn.parent;
  if (ts.isVariableDeclaration(p) && ts.isIdentifier(p.name)) return p.name.text;
  if (ts.isPropertyAssignment(p)) return `${ownerName(p.parent, sf)}.${propertyNameText(p.name, sf)}`;
  if (ts.isPropertyDeclaration(p)) return `${ownerName(p.parent, sf)}.${propertyNameText(p.name, sf)}`;
  if (ts.isExportAssignment(p)) return 'default';
  return null;
}

/** What the walker tells a visitor about where a node is. */
export interface WalkContext {
  /** Key of the nearest named enclosing function (`<module>` at the top level): what mutants belong to. */
  owner: string;
}

/**
 * Coverage keys of every function with a body in runtime code, in source order. Named functions are
 * keyed by name (nested ones by their path, `outer/inner`; members as `Class.member`); anonymous
 * ones by their owner and position (`owner/<anonymous:line:col>`). Duplicates get `#2`, `#3`, ...
 */
export function functionKeys(sf: ts.SourceFile): Map<FunctionWithBody, string> {
  const keys = new Map<FunctionWithBody, string>();
  const seen = new Map<string, number>();
  walkRuntime(sf, (node, ctx) => {
    if (!isFunctionWithBody(node)) return;
    const own = ownName(node, sf);
    let key: string;
    if (own !== null) key = ctx.owner === '<module>' || own.includes('.') ? own : `${ctx.owner}/${own}`;
    else {
      const { line, character } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
      key = `${ctx.owner}/<anonymous:${line + 1}:${character + 1}>`;
    }
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    keys.set(node, n === 1 ? key : `${key}#${n}`);
  });
  return keys;
}

/**
 * Visits every node of runtime code (see isOutsideRuntime) in source order, parents before children,
 * with the key of the nearest named enclosing function. Declaration files hold none.
 */
export function walkRuntime(sf: ts.SourceFile, visit: (node: ts.Node, ctx: WalkContext) => void): void {
  if (sf.isDeclarationFile) return;
  const named = new Map<ts.Node, string>();
  const step = (node: ts.Node, ctx: WalkContext): void => {
    if (isOutsideRuntime(node)) return;
    visit(node, ctx);
    let inner = ctx;
    if (isFunctionWithBody(node)) {
      const own = ownName(node, sf);
      if (own !== null) {
        const key = ctx.owner === '<module>' || own.includes('.') ? own : `${ctx.owner}/${own}`;
        named.set(node, key);
        inner = { owner: key };
      }
    }
    ts.forEachChild(node, (child) => step(child, inner));
  };
  ts.forEachChild(sf, (child) => step(child, { owner: '<module>' }));
}

/** The directive prologue of a function body or source file (`'use strict'` and friends). */
export function directives(statements: ts.NodeArray<ts.Statement>): ts.ExpressionStatement[] {
  const out: ts.ExpressionStatement[] = [];
  for (const s of statements) {
    if (ts.isExpressionStatement(s) && ts.isStringLiteral(s.expression)) out.push(s);
    else break;
  }
  return out;
}

/**
 * The span of a block's statements after its directives, without surrounding trivia: where an entry
 * counter, an early return or a wrapping `if` goes. Zero-width (just after `{` or the last
 * directive) when there is no statement.
 */
export function bodySpan(block: ts.Block, sf: ts.SourceFile, isFunctionBody: boolean): [number, number] {
  const skip = isFunctionBody ? directives(block.statements).length : 0;
  const rest = block.statements.slice(skip);
  if (rest.length > 0) return [rest[0]!.getStart(sf), rest[rest.length - 1]!.end];
  const at = skip > 0 ? block.statements[skip - 1]!.end : block.getStart(sf) + 1;
  return [at, at];
}
