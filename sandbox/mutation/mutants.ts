import ts from 'typescript';
import { sha256Hex } from '../../protocol/canonical.ts';
import { bodySpan, directives, isFunctionWithBody, parseSource, walkRuntime } from './ast.ts';
import { regexMutations } from './regex.ts';

/**
 * The mutation operators: Stryker's JavaScript mutators (same names, same replacements where
 * Stryker has one) plus the boundary, return-value and statement-removal mutations of PIT-style tools.
 */
export const MUTATION_OPERATORS = [
  'ArithmeticOperator',
  'ArrayDeclaration',
  'ArrowFunction',
  'AssignmentOperator',
  'BlockStatement',
  'BooleanLiteral',
  'Boundary',
  'ConditionalExpression',
  'EqualityOperator',
  'LogicalOperator',
  'MethodExpression',
  'ObjectLiteral',
  'OptionalChaining',
  'Regex',
  'ReturnValue',
  'StatementRemoval',
  'StringLiteral',
  'UnaryOperator',
  'UpdateOperator',
] as const;
export type MutationOperator = (typeof MUTATION_OPERATORS)[number];

/**
 * How the schemata switches a mutant: `expression` replaces an expression's text, `function-body`
 * returns early from a function (its body emptied), `block` skips a block's statements.
 */
export type MutantKind = 'expression' | 'function-body' | 'block';

/** One mutation of one source file. */
export interface Mutant {
  /** Stable id: a hash of file, operator, span and replacement (same source ⇒ same ids). */
  id: string;
  /** Workspace-relative path of the mutated file. */
  file: string;
  operator: MutationOperator;
  kind: MutantKind;
  /** Span [start, end) in the source, UTF-16 offsets. */
  start: number;
  end: number;
  /** Source text of the span. */
  original: string;
  /** What the span becomes (empty for `function-body` and `block` mutants). */
  replacement: string;
  /** 1-based line and column of `start`. */
  line: number;
  column: number;
  /** The nearest named enclosing function (`Class.method`, `outer/inner`), or `<module>`. */
  fn: string;
}

/** A mutant before its id, position and owner are filled in. */
interface Draft {
  operator: MutationOperator;
  kind: MutantKind;
  node: ts.Node;
  /** Overrides the node's span (blocks: their statements only). */
  span?: [number, number];
  replacement: string;
}

/** The text inserted where an empty string becomes a non-empty one (Stryker: "Stryker was here!"). */
export const FILLER = '__vtnode__';

/** The operator tables, built on first use: an idle node does not load TypeScript (the package bundle
 * loads it lazily). */
const buildOperators = () => ({
  ARITHMETIC: {
    [ts.SyntaxKind.PlusToken]: '-',
    [ts.SyntaxKind.MinusToken]: '+',
    [ts.SyntaxKind.AsteriskToken]: '/',
    [ts.SyntaxKind.SlashToken]: '*',
    [ts.SyntaxKind.PercentToken]: '*',
  } as Partial<Record<ts.SyntaxKind, string>>,
  /** `<` ↔ `<=` and `>` ↔ `>=`: off-by-one at the boundary. */
  BOUNDARY: {
    [ts.SyntaxKind.LessThanToken]: '<=',
    [ts.SyntaxKind.LessThanEqualsToken]: '<',
    [ts.SyntaxKind.GreaterThanToken]: '>=',
    [ts.SyntaxKind.GreaterThanEqualsToken]: '>',
  } as Partial<Record<ts.SyntaxKind, string>>,
  /** The negated comparison (Stryker's EqualityOperator without its boundary half). */
  EQUALITY: {
    [ts.SyntaxKind.LessThanToken]: '>=',
    [ts.SyntaxKind.LessThanEqualsToken]: '>',
    [ts.SyntaxKind.GreaterThanToken]: '<=',
    [ts.SyntaxKind.GreaterThanEqualsToken]: '<',
    [ts.SyntaxKind.EqualsEqualsToken]: '!=',
    [ts.SyntaxKind.ExclamationEqualsToken]: '==',
    [ts.SyntaxKind.EqualsEqualsEqualsToken]: '!==',
    [ts.SyntaxKind.ExclamationEqualsEqualsToken]: '===',
  } as Partial<Record<ts.SyntaxKind, string>>,
  LOGICAL: {
    [ts.SyntaxKind.AmpersandAmpersandToken]: '||',
    [ts.SyntaxKind.BarBarToken]: '&&',
    [ts.SyntaxKind.QuestionQuestionToken]: '&&',
  } as Partial<Record<ts.SyntaxKind, string>>,
  ASSIGNMENT: {
    [ts.SyntaxKind.PlusEqualsToken]: '-=',
    [ts.SyntaxKind.MinusEqualsToken]: '+=',
    [ts.SyntaxKind.AsteriskEqualsToken]: '/=',
    [ts.SyntaxKind.SlashEqualsToken]: '*=',
    [ts.SyntaxKind.PercentEqualsToken]: '*=',
    [ts.SyntaxKind.LessThanLessThanEqualsToken]: '>>=',
    [ts.SyntaxKind.GreaterThanGreaterThanEqualsToken]: '<<=',
    [ts.SyntaxKind.AmpersandEqualsToken]: '|=',
    [ts.SyntaxKind.BarEqualsToken]: '&=',
    [ts.SyntaxKind.AmpersandAmpersandEqualsToken]: '||=',
    [ts.SyntaxKind.BarBarEqualsToken]: '&&=',
    [ts.SyntaxKind.QuestionQuestionEqualsToken]: '&&=',
  } as Partial<Record<ts.SyntaxKind, string>>,
});
let operators: ReturnType<typeof buildOperators> | undefined;
/** Stryker's MethodExpression table: a swap, or null to drop the call and keep its receiver. */
const METHODS: Record<string, string | null> = {
  charAt: null,
  endsWith: 'startsWith',
  startsWith: 'endsWith',
  every: 'some',
  some: 'every',
  filter: null,
  reverse: null,
  slice: null,
  sort: null,
  substr: null,
  substring: null,
  toLocaleLowerCase: 'toLocaleUpperCase',
  toLocaleUpperCase: 'toLocaleLowerCase',
  toLowerCase: 'toUpperCase',
  toUpperCase: 'toLowerCase',
  trim: null,
  trimEnd: 'trimStart',
  trimStart: 'trimEnd',
  min: 'max',
  max: 'min',
};

/** `undefined`, `void x` and `null`: a return-value mutant to `undefined` would change nothing (or nearly). */
function isNothing(e: ts.Expression): boolean {
  const x = skipParens(e);
  return (
    (ts.isIdentifier(x) && x.text === 'undefined') ||
    ts.isVoidExpression(x) ||
    x.kind === ts.SyntaxKind.NullKeyword
  );
}

function skipParens(e: ts.Expression): ts.Expression {
  let x = e;
  while (ts.isParenthesizedExpression(x)) x = x.expression;
  return x;
}

const isStringy = (e: ts.Expression): boolean => {
  const x = skipParens(e);
  return ts.isStringLiteral(x) || ts.isNoSubstitutionTemplateLiteral(x) || ts.isTemplateExpression(x);
};
const isNumber = (e: ts.Expression, value: string): boolean => {
  const x = skipParens(e);
  return ts.isNumericLiteral(x) && x.text === value;
};

/**
 * True when the node sits on the left of an assignment or in a destructuring pattern, where an
 * expression cannot stand (`[a, b] = …`, `({ x } = …)`, `for (x of …)`).
 */
function isAssignmentTarget(node: ts.Node): boolean {
  let n: ts.Node = node;
  for (;;) {
    const p = n.parent;
    if (!p) return false;
    if (
      ts.isParenthesizedExpression(p) ||
      ts.isArrayLiteralExpression(p) ||
      ts.isSpreadElement(p) ||
      ts.isSpreadAssignment(p) ||
      ts.isShorthandPropertyAssignment(p) ||
      (ts.isPropertyAssignment(p) && p.initializer === n) ||
      ts.isObjectLiteralExpression(p)
    ) {
      n = p;
      continue;
    }
    if (ts.isBinaryExpression(p) && p.left === n)
      return (
        p.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
        p.operatorToken.kind <= ts.SyntaxKind.LastAssignment
      );
    if ((ts.isForOfStatement(p) || ts.isForInStatement(p)) && p.initializer === n) return true;
    if ((ts.isPrefixUnaryExpression(p) || ts.isPostfixUnaryExpression(p)) && n === node)
      return p.operator === ts.SyntaxKind.PlusPlusToken || p.operator === ts.SyntaxKind.MinusMinusToken;
    return false;
  }
}

/**
 * Can this expression be replaced by `(switch ? alternative : original)` without changing what the
 * original does? Not when it is a callee (a method call would lose its `this`), a tag, an assignment
 * target, the operand of `delete`, a computed key, the inside of an optional chain (parentheses end the chain's
 * short-circuit), the operand of `as const`, a JSX attribute string, or a directive.
 */
export function canWrap(node: ts.Node): boolean {
  const p = node.parent;
  if (!p) return false;
  if (ts.isCallExpression(p) && p.expression === node) return false;
  if (ts.isTaggedTemplateExpression(p) && (p.tag === node || p.template === node)) return false;
  if (ts.isDeleteExpression(p) || ts.isComputedPropertyName(p)) return false;
  if (ts.isJsxAttribute(p)) return false;
  if (ts.isExpressionStatement(p) && ts.isStringLiteral(node) && isDirective(p)) return false;
  if (
    (ts.isPropertyAccessExpression(p) ||
      ts.isElementAccessExpression(p) ||
      ts.isCallExpression(p) ||
      ts.isNonNullExpression(p)) &&
    p.expression === node &&
    (p.flags & ts.NodeFlags.OptionalChain) !== 0 &&
    !('questionDotToken' in p && p.questionDotToken)
  )
    return false;
  if (ts.isAsExpression(p) && ts.isTypeReferenceNode(p.type) && p.type.typeName.getText() === 'const')
    return false;
  return !isAssignmentTarget(node);
}

function isDirective(stmt: ts.ExpressionStatement): boolean {
  const list = stmt.parent;
  if (ts.isSourceFile(list) || (ts.isBlock(list) && isFunctionWithBody(list.parent)))
    return directives(list.statements).includes(stmt);
  return false;
}

/** Replaces the operator token of a binary expression in its text. */
function withOperator(node: ts.BinaryExpression, op: string, sf: ts.SourceFile): string {
  const start = node.getStart(sf);
  const text = node.getText(sf);
  const tok = node.operatorToken;
  return `${text.slice(0, tok.getStart(sf) - start)}${op}${text.slice(tok.end - start)}`;
}

type Rule = (node: ts.Node, sf: ts.SourceFile) => Draft[];

const expr = (operator: MutationOperator, node: ts.Node, replacement: string): Draft => ({
  operator,
  kind: 'expression',
  node,
  replacement,
});

const binaryRules: Rule = (node, sf) => {
  if (!ts.isBinaryExpression(node) || !canWrap(node)) return [];
  const k = node.operatorToken.kind;
  const out: Draft[] = [];
  operators ??= buildOperators();
  const { ARITHMETIC, BOUNDARY, EQUALITY, LOGICAL, ASSIGNMENT } = operators;
  const arith = ARITHMETIC[k];
  // `s + x` with a string operand is concatenation: `-` makes NaN, killed by any test, no signal.
  // `x + 0`, `x - 0`, `x * 1`, `x / 1` mutate into an equivalent program.
  const concat = k === ts.SyntaxKind.PlusToken && (isStringy(node.left) || isStringy(node.right));
  const neutral =
    ((k === ts.SyntaxKind.PlusToken || k === ts.SyntaxKind.MinusToken) && isNumber(node.right, '0')) ||
    ((k === ts.SyntaxKind.AsteriskToken || k === ts.SyntaxKind.SlashToken) && isNumber(node.right, '1'));
  if (arith && !concat && !neutral) out.push(expr('ArithmeticOperator', node, withOperator(node, arith, sf)));
  const boundary = BOUNDARY[k];
  if (boundary) out.push(expr('Boundary', node, withOperator(node, boundary, sf)));
  const equality = EQUALITY[k];
  if (equality) out.push(expr('EqualityOperator', node, withOperator(node, equality, sf)));
  const logical = LOGICAL[k];
  if (logical) out.push(expr('LogicalOperator', node, withOperator(node, logical, sf)));
  const assign = ASSIGNMENT[k];
  if (assign) out.push(expr('AssignmentOperator', node, withOperator(node, assign, sf)));
  return out;
};

const unaryRules: Rule = (node, sf) => {
  if (ts.isPrefixUnaryExpression(node) && canWrap(node)) {
    const operand = node.operand.getText(sf);
    switch (node.operator) {
      case ts.SyntaxKind.ExclamationToken: {
        // `!!x`: dropping the inner `!` gives the same program as dropping the outer one.
        const p = node.parent;
        if (ts.isPrefixUnaryExpression(p) && p.operator === ts.SyntaxKind.ExclamationToken) return [];
        return [expr('BooleanLiteral', node, operand)];
      }
      // `-x` → `x` rather than `+x`: unary plus throws on a bigint, which would make a trivial mutant.
      case ts.SyntaxKind.MinusToken:
        return isNumber(node.operand, '0') ? [] : [expr('UnaryOperator', node, operand)];
      case ts.SyntaxKind.PlusToken:
        return [expr('UnaryOperator', node, `-${operand}`)];
      case ts.SyntaxKind.TildeToken:
        return [expr('UnaryOperator', node, operand)];
      case ts.SyntaxKind.PlusPlusToken:
        return [expr('UpdateOperator', node, `--${operand}`)];
      case ts.SyntaxKind.MinusMinusToken:
        return [expr('UpdateOperator', node, `++${operand}`)];
    }
  }
  if (ts.isPostfixUnaryExpression(node) && canWrap(node)) {
    const operand = node.operand.getText(sf);
    return [
      expr(
        'UpdateOperator',
        node,
        `${operand}${node.operator === ts.SyntaxKind.PlusPlusToken ? '--' : '++'}`,
      ),
    ];
  }
  return [];
};

const literalRules: Rule = (node, sf) => {
  if (!canWrap(node)) return [];
  if (node.kind === ts.SyntaxKind.TrueKeyword) return [expr('BooleanLiteral', node, 'false')];
  if (node.kind === ts.SyntaxKind.FalseKeyword) return [expr('BooleanLiteral', node, 'true')];
  if (ts.isStringLiteral(node)) {
    if (!isValueString(node)) return [];
    const q = node.getText(sf)[0] === '"' ? '"' : "'";
    return [expr('StringLiteral', node, node.text === '' ? `${q}${FILLER}${q}` : `${q}${q}`)];
  }
  if (ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)) {
    const empty = ts.isNoSubstitutionTemplateLiteral(node) && node.text === '';
    return [expr('StringLiteral', node, empty ? `\`${FILLER}\`` : '``')];
  }
  if (ts.isRegularExpressionLiteral(node))
    return regexMutations(node.text).map((r) => expr('Regex', node, r));
  return [];
};

/** A string literal that is a value (not a key, module specifier, or part of a declaration's syntax). */
function isValueString(node: ts.StringLiteral): boolean {
  const p = node.parent;
  // Keys: `{ 'a': 1 }`, `['a']: 1`, `'m'() {}`, class fields, enum members.
  if (('name' in p && p.name === node) || ts.isComputedPropertyName(p)) return false;
  if ((ts.isCallExpression(p) && p.arguments[0] === node) || ts.isExternalModuleReference(p)) {
    const callee = (p as ts.CallExpression).expression;
    if (
      callee &&
      (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require'))
    )
      return false;
  }
  if (ts.isLiteralTypeNode(p) || ts.isImportTypeNode(p)) return false;
  return true;
}

const collectionRules: Rule = (node) => {
  if (!canWrap(node)) return [];
  if (ts.isArrayLiteralExpression(node))
    return [expr('ArrayDeclaration', node, node.elements.length > 0 ? '[]' : `['${FILLER}']`)];
  if (ts.isNewExpression(node) || ts.isCallExpression(node)) {
    const callee = node.expression;
    if (ts.isIdentifier(callee) && callee.text === 'Array' && (node.arguments?.length ?? 0) > 0)
      return [expr('ArrayDeclaration', node, `${ts.isNewExpression(node) ? 'new ' : ''}Array()`)];
  }
  if (ts.isObjectLiteralExpression(node) && node.properties.length > 0)
    return [expr('ObjectLiteral', node, '{}')];
  return [];
};

const callRules: Rule = (node, sf) => {
  if (!ts.isCallExpression(node) || !canWrap(node)) return [];
  const callee = node.expression;
  if (!ts.isPropertyAccessExpression(callee) || !ts.isIdentifier(callee.name)) return [];
  const swap = METHODS[callee.name.text];
  if (swap === undefined || !Object.hasOwn(METHODS, callee.name.text)) return [];
  if (swap === null) return [expr('MethodExpression', node, callee.expression.getText(sf))];
  const start = node.getStart(sf);
  const text = node.getText(sf);
  const nameStart = callee.name.getStart(sf) - start;
  return [
    expr(
      'MethodExpression',
      node,
      `${text.slice(0, nameStart)}${swap}${text.slice(callee.name.end - start)}`,
    ),
  ];
};

/** `a?.b.c` → `a.b.c`: the whole chain is the mutant (parentheses inside it would end the chain). */
const optionalChainRules: Rule = (node, sf) => {
  if (
    !(ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node) || ts.isCallExpression(node))
  )
    return [];
  const dot = node.questionDotToken;
  if (!dot) return [];
  let top: ts.Node = node;
  for (;;) {
    const p: ts.Node = top.parent;
    const continues =
      (ts.isPropertyAccessExpression(p) ||
        ts.isElementAccessExpression(p) ||
        ts.isCallExpression(p) ||
        ts.isNonNullExpression(p)) &&
      p.expression === top &&
      (p.flags & ts.NodeFlags.OptionalChain) !== 0;
    if (!continues) break;
    top = p;
  }
  if (!canWrap(top)) return [];
  const start = top.getStart(sf);
  const text = top.getText(sf);
  const at = dot.getStart(sf) - start;
  const keep = ts.isPropertyAccessExpression(node) ? '.' : '';
  return [expr('OptionalChaining', top, `${text.slice(0, at)}${keep}${text.slice(at + 2)}`)];
};

const conditionRules: Rule = (node) => {
  const test =
    ts.isIfStatement(node) || ts.isWhileStatement(node) || ts.isDoStatement(node)
      ? node.expression
      : ts.isForStatement(node)
        ? node.condition
        : ts.isConditionalExpression(node)
          ? node.condition
          : undefined;
  if (!test || !canWrap(test)) return [];
  const x = skipParens(test);
  if (x.kind === ts.SyntaxKind.TrueKeyword || x.kind === ts.SyntaxKind.FalseKeyword) return [];
  const out = [expr('ConditionalExpression', test, 'false')];
  // A loop whose condition is always true never ends: only `false` for loops.
  if (ts.isIfStatement(node) || ts.isConditionalExpression(node))
    out.push(expr('ConditionalExpression', test, 'true'));
  return out;
};

/** `return x` → `return undefined`; a concise arrow body (visited as itself, so it belongs to its arrow) likewise. */
const returnRules: Rule = (node) => {
  if (
    ts.isReturnStatement(node) &&
    node.expression &&
    !isNothing(node.expression) &&
    canWrap(node.expression)
  )
    return [expr('ReturnValue', node.expression, 'undefined')];
  const p = node.parent;
  if (p && ts.isArrowFunction(p) && p.body === node && !ts.isBlock(node) && !isNothing(node as ts.Expression))
    return [expr('ArrowFunction', node, 'undefined')];
  return [];
};

/** Calls, assignments, updates and deletes as statements; never `super(…)` (the object would not exist). */
const statementRules: Rule = (node) => {
  if (!ts.isExpressionStatement(node) || isDirective(node)) return [];
  const e = skipParens(node.expression);
  const isCall = ts.isCallExpression(e) || (ts.isAwaitExpression(e) && ts.isCallExpression(e.expression));
  if (isCall && e.getFirstToken()?.kind === ts.SyntaxKind.SuperKeyword) return [];
  const isAssign =
    ts.isBinaryExpression(e) &&
    e.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
    e.operatorToken.kind <= ts.SyntaxKind.LastAssignment;
  const isUpdate =
    ts.isPrefixUnaryExpression(e) || ts.isPostfixUnaryExpression(e) || ts.isDeleteExpression(e);
  if (!(isCall || isAssign || isUpdate) || !canWrap(node.expression)) return [];
  return [expr('StatementRemoval', node.expression, 'void 0')];
};

/**
 * Empties a block. Skipped where it would duplicate another mutant (a block of one `return` or one
 * expression statement: ReturnValue / StatementRemoval already do it), in derived-class constructors
 * (no `super()`: every construction throws, no signal) and in class static blocks.
 */
const blockRules: Rule = (node, sf) => {
  if (!ts.isBlock(node)) return [];
  const p = node.parent;
  if (ts.isClassStaticBlockDeclaration(p)) return [];
  const isBody = isFunctionWithBody(p) && p.body === node;
  const stmts = isBody ? node.statements.slice(directives(node.statements).length) : node.statements;
  if (stmts.length === 0) return [];
  if (stmts.length === 1 && (ts.isReturnStatement(stmts[0]!) || ts.isExpressionStatement(stmts[0]!)))
    return [];
  if (
    ts.isConstructorDeclaration(p) &&
    p.parent.heritageClauses?.some((h) => h.token === ts.SyntaxKind.ExtendsKeyword)
  )
    return [];
  return [
    {
      operator: 'BlockStatement',
      kind: isBody ? 'function-body' : 'block',
      node,
      span: bodySpan(node, sf, isBody),
      replacement: '',
    },
  ];
};

const RULES: Rule[] = [
  binaryRules,
  unaryRules,
  literalRules,
  collectionRules,
  callRules,
  optionalChainRules,
  conditionRules,
  returnRules,
  statementRules,
  blockRules,
];

// Code-point comparison, not localeCompare: the order must not depend on the host's locale.
const cmp = (x: string, y: string): number => (x < y ? -1 : x > y ? 1 : 0);

/** Source order: file, start, longest span first, operator, replacement (a total order). */
export function compareMutants(a: Mutant, b: Mutant): number {
  return (
    cmp(a.file, b.file) ||
    a.start - b.start ||
    b.end - a.end ||
    cmp(a.operator, b.operator) ||
    cmp(a.replacement, b.replacement)
  );
}

/** The stable id of a mutant: same file, operator, span and replacement ⇒ same id. */
export function mutantId(
  file: string,
  operator: string,
  start: number,
  end: number,
  replacement: string,
): string {
  return `m${sha256Hex(`${file}\0${operator}\0${start}\0${end}\0${replacement}`).slice(0, 12)}`;
}

/**
 * Every mutation point of a source file, in source order (start, longest span first, operator,
 * replacement). Nothing is
 * mutated in type positions, declarations that only exist in types, `declare`d code, imports and
 * exports, decorators, directives, object and class keys, enums and module specifiers.
 */
export function enumerateMutants(source: string, file: string): Mutant[] {
  const sf = parseSource(source, file);
  const out = new Map<string, Mutant>();
  walkRuntime(sf, (node, ctx) => {
    for (const rule of RULES)
      for (const d of rule(node, sf)) {
        const [start, end] = d.span ?? [d.node.getStart(sf), d.node.end];
        const original = source.slice(start, end);
        if (d.kind === 'expression' && d.replacement === original) continue;
        const id = mutantId(file, d.operator, start, end, d.replacement);
        const { line, character } = sf.getLineAndCharacterOfPosition(start);
        out.set(id, {
          id,
          file,
          operator: d.operator,
          kind: d.kind,
          start,
          end,
          original,
          replacement: d.replacement,
          line: line + 1,
          column: character + 1,
          fn: ctx.owner,
        });
      }
  });
  return [...out.values()].sort(compareMutants);
}
