import { posix } from 'node:path';
import ts from 'typescript';

/**
 * A runner configuration read WITHOUT running it (the miner never executes workspace code): the keys
 * whose values are literals, and the keys whose values are computed (`dynamic`), which the caller must
 * not guess.
 */
export interface StaticConfig {
  values: Record<string, unknown>;
  dynamic: Set<string>;
}

/** Marks a value that is not a literal (a call, a variable, a spread, ...). */
const DYNAMIC = Symbol('dynamic');

function literal(node: ts.Expression): unknown {
  const inner = unwrap(node);
  if (ts.isStringLiteralLike(inner)) return inner.text;
  if (ts.isNumericLiteral(inner)) return Number(inner.text);
  if (inner.kind === ts.SyntaxKind.TrueKeyword) return true;
  if (inner.kind === ts.SyntaxKind.FalseKeyword) return false;
  if (inner.kind === ts.SyntaxKind.NullKeyword) return null;
  // A regular expression literal stands for its source (jest's testRegex accepts both forms).
  if (ts.isRegularExpressionLiteral(inner)) return inner.text.slice(1, inner.text.lastIndexOf('/'));
  if (ts.isArrayLiteralExpression(inner)) {
    const items = inner.elements.map((e) => (ts.isSpreadElement(e) ? DYNAMIC : literal(e)));
    return items.includes(DYNAMIC) ? DYNAMIC : items;
  }
  if (ts.isObjectLiteralExpression(inner)) {
    const out = objectLiteral(inner);
    return out.dynamic.size > 0 ? DYNAMIC : out.values;
  }
  return DYNAMIC;
}

function propertyName(name: ts.PropertyName): string | null {
  if (ts.isIdentifier(name) || ts.isStringLiteralLike(name) || ts.isNumericLiteral(name)) return name.text;
  return null;
}

function objectLiteral(node: ts.ObjectLiteralExpression): StaticConfig {
  const values: Record<string, unknown> = {};
  const dynamic = new Set<string>();
  for (const p of node.properties) {
    const name = p.name ? propertyName(p.name) : null;
    if (name === null) {
      // `...spread` or a computed key: any key may be affected.
      dynamic.add('*');
      continue;
    }
    const value = ts.isPropertyAssignment(p) ? literal(p.initializer) : DYNAMIC;
    if (value === DYNAMIC) dynamic.add(name);
    else values[name] = value;
  }
  return { values, dynamic };
}

/** `x as T`, `x satisfies T`, `(x)`, `defineConfig(x)`: the expression that holds the object. */
function unwrap(node: ts.Expression): ts.Expression {
  let n = node;
  for (;;) {
    if (ts.isParenthesizedExpression(n) || ts.isAsExpression(n) || ts.isSatisfiesExpression(n))
      n = n.expression;
    else if (
      ts.isCallExpression(n) &&
      n.arguments.length === 1 &&
      ts.isObjectLiteralExpression(n.arguments[0]!)
    )
      n = n.arguments[0]!;
    else return n;
  }
}

/** The expression a module exports: `export default X` or `module.exports = X`. */
function exportedExpression(sf: ts.SourceFile): ts.Expression | null {
  for (const stmt of sf.statements) {
    if (ts.isExportAssignment(stmt)) return stmt.expression;
    if (
      ts.isExpressionStatement(stmt) &&
      ts.isBinaryExpression(stmt.expression) &&
      stmt.expression.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
      stmt.expression.left.getText(sf) === 'module.exports'
    )
      return stmt.expression.right;
  }
  return null;
}

/** The initializer of a top-level `const name = ...`. */
function constInitializer(sf: ts.SourceFile, name: string): ts.Expression | null {
  for (const stmt of sf.statements) {
    if (!ts.isVariableStatement(stmt)) continue;
    for (const d of stmt.declarationList.declarations)
      if (ts.isIdentifier(d.name) && d.name.text === name && d.initializer) return d.initializer;
  }
  return null;
}

function fromModule(path: string, text: string): StaticConfig | null {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  let expr = exportedExpression(sf);
  if (expr && ts.isIdentifier(unwrap(expr)))
    expr = constInitializer(sf, (unwrap(expr) as ts.Identifier).text);
  if (!expr) return null;
  const obj = unwrap(expr);
  return ts.isObjectLiteralExpression(obj) ? objectLiteral(obj) : null;
}

function fromJson(path: string, text: string): StaticConfig | null {
  const parsed = ts.parseConfigFileTextToJson(path, text);
  if (parsed.error || typeof parsed.config !== 'object' || parsed.config === null) return null;
  return { values: parsed.config as Record<string, unknown>, dynamic: new Set() };
}

function yamlScalar(raw: string): unknown {
  const v = raw.trim();
  if (/^(['"]).*\1$/.test(v)) return v.slice(1, -1);
  if (v === 'true' || v === 'false') return v === 'true';
  if (/^-?\d+(\.\d+)?$/.test(v)) return Number(v);
  return v;
}

/**
 * The subset of YAML that .mocharc.yml files use: `key: scalar`, `key: [a, b]` and `key:` followed by
 * `- item` lines. Anything else (nesting, anchors, multi-line strings) makes the file unreadable (null).
 */
export function simpleYaml(text: string): Record<string, unknown> | null {
  const out: Record<string, unknown> = {};
  let list: unknown[] | null = null;
  for (const rawLine of text.split('\n')) {
    const line = rawLine.replace(/\s+#.*$/, '').replace(/^#.*$/, '');
    if (line.trim() === '' || line.trim() === '---') continue;
    const item = /^\s+-\s+(.*)$/.exec(line) ?? /^-\s+(.*)$/.exec(line);
    if (item && list) {
      list.push(yamlScalar(item[1]!));
      continue;
    }
    const kv = /^([A-Za-z0-9_-]+)\s*:\s*(.*)$/.exec(line);
    if (!kv) return null;
    const [, key, value] = kv as unknown as [string, string, string];
    if (value === '') {
      list = [];
      out[key] = list;
    } else if (/^\[.*\]$/.test(value)) {
      list = null;
      const inner = value.slice(1, -1).trim();
      out[key] = inner === '' ? [] : inner.split(',').map(yamlScalar);
    } else {
      list = null;
      out[key] = yamlScalar(value);
    }
  }
  return out;
}

/** Reads a config file by its extension: JSON(C), the YAML subset, or a JS/TS module exporting a literal. */
export function readStaticConfig(path: string, text: string): StaticConfig | null {
  const ext = posix.extname(path);
  if (ext === '.json' || ext === '.jsonc') return fromJson(path, text);
  if (ext === '.yaml' || ext === '.yml') {
    const values = simpleYaml(text);
    return values ? { values, dynamic: new Set() } : null;
  }
  if (/^\.[cm]?[jt]s$/.test(ext)) return fromModule(path, text);
  return null;
}

/** A string or a list of strings (config fields that accept both), or null for anything else. */
export function stringList(value: unknown): string[] | null {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value as string[];
  return null;
}
