// A tests candidate that carries its own copy of the code under test can "kill" every mutant by
// comparing the two (no knowledge of the behaviour). This finds such copies: the shape of each function
// of the sources (its syntax tree in pre-order, identifiers, literals, types and parentheses left out,
// so renaming, reformatting, re-typing or converting TypeScript to JavaScript changes nothing) is cut
// into k-grams, and a function counts as copied when the test file holds most of its k-grams.
import ts from 'typescript';
import { isFunctionWithBody, isOutsideRuntime, parseSource } from './ast.ts';

/** Length of the node-kind sequences compared (shorter ones match by chance across unrelated code). */
export const SHINGLE = 6;
/** Functions with fewer runtime nodes than this are idioms more than code: never counted as copied. */
export const MIN_NODES = 30;
/**
 * Share of a source function's k-grams a test file must hold for the function to count as copied.
 * On examples/ledger the original test files hold at most 0.47 of any source function's k-grams (and
 * 0.13 on median), while pasted copies (renamed, reformatted, typed differently, a body partly copied)
 * hold 0.80 to 1 (test/sandbox/mutation/similarity.test.ts).
 */
export const COPY_THRESHOLD = 0.6;

const COLLAPSED = (k: ts.SyntaxKind): string | null => {
  switch (k) {
    case ts.SyntaxKind.Identifier:
    case ts.SyntaxKind.PrivateIdentifier:
      return 'I';
    case ts.SyntaxKind.StringLiteral:
    case ts.SyntaxKind.NumericLiteral:
    case ts.SyntaxKind.BigIntLiteral:
    case ts.SyntaxKind.NoSubstitutionTemplateLiteral:
    case ts.SyntaxKind.RegularExpressionLiteral:
    case ts.SyntaxKind.TemplateHead:
    case ts.SyntaxKind.TemplateMiddle:
    case ts.SyntaxKind.TemplateTail:
      return 'L';
    default:
      return null;
  }
};

/** The runtime shape of a subtree: node kinds in pre-order, without types, parentheses or names. */
export function shape(node: ts.Node): string[] {
  const out: string[] = [];
  const visit = (n: ts.Node): void => {
    if (isOutsideRuntime(n)) return;
    // `x as T`, `x!`, `<T>x`, `x satisfies T` and `(x)` are their operand at run time.
    const transparent =
      ts.isParenthesizedExpression(n) ||
      ts.isAsExpression(n) ||
      ts.isNonNullExpression(n) ||
      ts.isTypeAssertionExpression(n) ||
      ts.isSatisfiesExpression(n);
    if (!transparent) out.push(COLLAPSED(n.kind) ?? String(n.kind));
    ts.forEachChild(n, visit);
  };
  visit(node);
  return out;
}

const shingles = (seq: string[]): Set<string> => {
  const out = new Set<string>();
  for (let i = 0; i + SHINGLE <= seq.length; i++) out.add(seq.slice(i, i + SHINGLE).join(' '));
  return out;
};

/** One source function and how much of it a test file holds. */
export interface CopiedFunction {
  /** `file#line` of the function in the sources. */
  at: string;
  /** Share of its k-grams found in the test file. */
  share: number;
  nodes: number;
}

/** Every function of the sources with at least MIN_NODES nodes, and the share of its k-grams in `test`. */
export function functionShares(
  test: { path: string; text: string },
  sources: { path: string; text: string }[],
): CopiedFunction[] {
  const held = shingles(shape(parseSource(test.text, test.path)));
  const out: CopiedFunction[] = [];
  for (const s of sources) {
    const sf = parseSource(s.text, s.path);
    const visit = (n: ts.Node): void => {
      if (isFunctionWithBody(n) && n.body) {
        const seq = shape(n.body);
        if (seq.length >= MIN_NODES) {
          const own = shingles(seq);
          let hit = 0;
          for (const g of own) if (held.has(g)) hit++;
          const line = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
          out.push({ at: `${s.path}#${line}`, share: hit / own.size, nodes: seq.length });
        }
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return out;
}

/**
 * The functions of the sources a candidate test file copies and the original test file does not (a
 * copy the original already carries is the task's own, not the candidate's doing).
 */
export function copiedFunctions(
  candidate: { path: string; text: string },
  original: { path: string; text: string } | null,
  sources: { path: string; text: string }[],
): CopiedFunction[] {
  const before = new Map(
    original ? functionShares(original, sources).map((f) => [f.at, f.share] as const) : [],
  );
  return functionShares(candidate, sources).filter(
    (f) => f.share >= COPY_THRESHOLD && (before.get(f.at) ?? 0) < COPY_THRESHOLD,
  );
}
