import ts from 'typescript';
import { sha256Hex } from '../../protocol/canonical.ts';
import {
  bodySpan,
  type FunctionWithBody,
  functionKeys,
  isFunctionWithBody,
  isTypeScript,
  parseSource,
  walkRuntime,
} from './ast.ts';
import type { Mutant } from './mutants.ts';

/** The global property that holds the run-time state of every instrumented module. */
export const DEFAULT_STATE_KEY = '__vtnode_mutation';
/**
 * Loop iterations plus function entries a test file may make under an active mutant before it is
 * stopped. At roughly 10–50 ns each that is well under a second, and far above what the reference
 * test files of the example corpus make (reported per run in the coverage file: see plan.ts).
 */
export const DEFAULT_HIT_LIMIT = 5_000_000;
/** The marker in the error a stopped mutant throws (and in the failure the runner reports). */
export const HIT_LIMIT_MARKER = 'VTNODE_HIT_LIMIT';

/**
 * The run-time state, shared by every instrumented module and the copies of the test file through
 * `globalThis[stateKey]` (created by whichever runs first). `active` is read each time a mutation
 * point is evaluated, so a module loaded once serves every test file of a shared registry.
 */
export interface MutationState {
  /** Token of the active mutant, or null: the original behaviour. */
  active: string | null;
  /** Function entries per instrumented file and function key. */
  cov: Record<string, Record<string, number>>;
  /** Loop iterations plus function entries since the state was last reset. */
  hits: number;
  /** Past this many hits an active mutant throws HIT_LIMIT_MARKER. */
  limit: number;
  /** True once the limit was hit (a test may have swallowed the error). */
  tripped: boolean;
}

export interface InstrumentOptions {
  /** Global property of the state (default DEFAULT_STATE_KEY). */
  stateKey?: string;
  /** Secret mixed into the run-time tokens: a fresh one per run keeps tokens unguessable from ids. */
  salt?: string;
  /** Hit limit of a state this module creates (an activator normally sets it). */
  hitLimit?: number;
}

/** One source file with its mutants compiled in, switched at run time. */
export interface Schemata {
  /** Workspace-relative path of the instrumented file. */
  file: string;
  /** The instrumented source. */
  text: string;
  stateKey: string;
  /** Mutant id → the token that activates it (`state.active = token`). */
  tokens: Record<string, string>;
  /** Coverage keys of the file's functions, in source order (see ast.ts functionKeys). */
  functions: string[];
}

/** The token that activates a mutant under a salt. */
export function tokenFor(id: string, salt: string): string {
  return `t${sha256Hex(`${salt}\0${id}`).slice(0, 12)}`;
}

/**
 * A text change: `before` at `start`, `after` at `end`, the text between rendered with nested edits
 * (or, with `replace`, that text instead of the span and everything nested in it).
 */
export interface Edit {
  start: number;
  end: number;
  before: string;
  after: string;
  /** Replaces the span's text (nested edits dropped). */
  replace?: string;
  /** Order of edits with the same span, outermost first. */
  rank: number;
  /** Starts an expression statement: needs a `;` unless its parent edit starts there too (ASI). */
  asi: boolean;
}

interface EditNode extends Edit {
  children: EditNode[];
}

/** Nests edits by span (they come from AST nodes: nested or disjoint) and renders the text. */
export function renderEdits(text: string, edits: Edit[]): string {
  const sorted = [...edits].sort((a, b) => a.start - b.start || b.end - a.end || a.rank - b.rank);
  const root: EditNode = {
    start: 0,
    end: text.length,
    before: '',
    after: '',
    rank: -1,
    asi: false,
    children: [],
  };
  const stack: EditNode[] = [root];
  for (const e of sorted) {
    for (;;) {
      const top = stack[stack.length - 1]!;
      const same = top.start === e.start && top.end === e.end;
      if (top === root || same || e.start < top.end) break;
      stack.pop();
    }
    const parent = stack[stack.length - 1]!;
    if (e.end > parent.end)
      throw new Error(`edits overlap: [${e.start}, ${e.end}) crosses [${parent.start}, ${parent.end})`);
    const node: EditNode = { ...e, children: [] };
    parent.children.push(node);
    stack.push(node);
  }
  const emit = (n: EditNode): string => {
    if (n.replace !== undefined) return n.before + n.replace + n.after;
    let out = n.before;
    let pos = n.start;
    for (const c of n.children) {
      out += text.slice(pos, c.start);
      if (c.asi && c.start !== n.start) out += ';';
      out += emit(c);
      pos = c.end;
    }
    return out + text.slice(pos, n.end) + n.after;
  };
  return emit(root);
}

/** Helper names that do not clash with anything in the source. */
export function helperNames(source: string): { S: string; M: string; E: string; L: string; H: string } {
  let prefix = '__vtnode';
  for (let n = 1; source.includes(prefix); n++) prefix = `__vtnode${n}_`;
  return { S: `${prefix}S`, M: `${prefix}M`, E: `${prefix}E`, L: `${prefix}L`, H: `${prefix}H` };
}

/**
 * The run-time helpers, appended as function declarations: hoisted, so they work even when a cycle
 * calls into the module before its body ran; they look the state up on every call (nothing is
 * captured at import time).
 */
function runtimeSource(h: ReturnType<typeof helperNames>, file: string, key: string, limit: number): string {
  const k = JSON.stringify(key);
  return [
    '',
    '// vtnode mutation schemata: run-time switch, coverage counters and hit limit (generated).',
    `function ${h.S}() {`,
    '  const g = globalThis;',
    `  return g[${k}] ?? (g[${k}] = { active: null, cov: Object.create(null), hits: 0, limit: ${limit}, tripped: false });`,
    '}',
    `function ${h.M}(t) {`,
    `  return ${h.S}().active === t;`,
    '}',
    `function ${h.E}(k) {`,
    `  const s = ${h.S}();`,
    `  const c = s.cov[${JSON.stringify(file)}] ?? (s.cov[${JSON.stringify(file)}] = Object.create(null));`,
    '  c[k] = (c[k] ?? 0) + 1;',
    `  ${h.H}(s);`,
    '}',
    `function ${h.L}() {`,
    `  ${h.H}(${h.S}());`,
    '}',
    `function ${h.H}(s) {`,
    '  if (++s.hits > s.limit && s.active !== null) {',
    '    s.tripped = true;',
    `    throw new Error('${HIT_LIMIT_MARKER}: more than ' + s.limit + ' loop iterations and calls under mutant ' + s.active);`,
    '  }',
    '}',
    '',
  ].join('\n');
}

const isLoop = (n: ts.Node): n is ts.IterationStatement =>
  ts.isForStatement(n) ||
  ts.isForInStatement(n) ||
  ts.isForOfStatement(n) ||
  ts.isWhileStatement(n) ||
  ts.isDoStatement(n);

/** Built on first use: an idle node does not load TypeScript (the package bundle loads it lazily). */
let listParents: Set<ts.SyntaxKind> | undefined;
const LIST_PARENTS = (): Set<ts.SyntaxKind> =>
  (listParents ??= new Set([
    ts.SyntaxKind.SourceFile,
    ts.SyntaxKind.Block,
    ts.SyntaxKind.ModuleBlock,
    ts.SyntaxKind.CaseClause,
    ts.SyntaxKind.DefaultClause,
  ]));

/** Entry counters, loop counters and the starts of statements that ASI could glue to the previous line. */
export function probeEdits(
  sf: ts.SourceFile,
  h: ReturnType<typeof helperNames>,
): { edits: Edit[]; asi: Set<number>; keys: string[] } {
  const keys = functionKeys(sf);
  const edits: Edit[] = [];
  const asi = new Set<number>();
  const probe = (start: number, end: number, before: string, after = ''): Edit => ({
    start,
    end,
    before,
    after,
    rank: 0,
    asi: false,
  });
  walkRuntime(sf, (node) => {
    const key = isFunctionWithBody(node) ? keys.get(node) : undefined;
    if (key !== undefined) {
      const body = (node as FunctionWithBody).body!;
      const call = `${h.E}(${JSON.stringify(key)})`;
      if (ts.isBlock(body)) edits.push(probe(...bodySpan(body, sf, true), `${call};`));
      else edits.push(probe(body.getStart(sf), body.end, `(${call}, `, ')'));
    }
    if (isLoop(node)) {
      const body = node.statement;
      if (ts.isBlock(body)) edits.push(probe(...bodySpan(body, sf, false), `${h.L}();`));
      else edits.push(probe(body.getStart(sf), body.end, `{ ${h.L}(); `, ' }'));
    }
    if (ts.isExpressionStatement(node) && LIST_PARENTS().has(node.parent.kind)) asi.add(node.getStart(sf));
  });
  return { edits, asi, keys: [...keys.values()] };
}

/** The edit that switches one mutant. */
function mutantEdit(
  m: Mutant,
  token: string,
  h: ReturnType<typeof helperNames>,
  typed: boolean,
  asi: Set<number>,
): Edit {
  const on = `${h.M}(${JSON.stringify(token)})`;
  switch (m.kind) {
    case 'function-body':
      // `as never` adds nothing to an inferred return type: importers type-check as before.
      return {
        start: m.start,
        end: m.end,
        before: `if (${on}) return${typed ? ' undefined as never' : ''};`,
        after: '',
        rank: 1,
        asi: false,
      };
    case 'block':
      return { start: m.start, end: m.end, before: `if (!${on}) {`, after: '}', rank: 2, asi: false };
    case 'expression': {
      // `(alt as never)` keeps the conditional's static type that of the original expression.
      const alt = typed ? `((${m.replacement}) as never)` : `(${m.replacement})`;
      return {
        start: m.start,
        end: m.end,
        before: `(${on} ? ${alt} : (`,
        after: '))',
        rank: 3,
        asi: asi.has(m.start),
      };
    }
  }
}

/**
 * Compiles `mutants` of one source file into one source (mutant schemata): with no active mutant it
 * behaves exactly like the original; each mutation point reads the active token when it is evaluated.
 * Every function entry bumps a coverage counter and every loop iteration and function entry the hit
 * counter, so an infinite loop under a mutant ends with HIT_LIMIT_MARKER instead of hanging the run.
 * Function declarations, imports, exports and directives keep their place; `// @ts-nocheck` comes first.
 */
export function instrument(
  source: string,
  file: string,
  mutants: Mutant[],
  options: InstrumentOptions = {},
): Schemata {
  const stateKey = options.stateKey ?? DEFAULT_STATE_KEY;
  const salt = options.salt ?? '';
  const sf = parseSource(source, file);
  const h = helperNames(source);
  const typed = isTypeScript(file);
  const { edits, asi, keys } = probeEdits(sf, h);
  const tokens: Record<string, string> = {};
  for (const m of mutants) {
    if (m.file !== file) throw new Error(`mutant ${m.id} belongs to ${m.file}, not ${file}`);
    if (source.slice(m.start, m.end) !== m.original)
      throw new Error(`mutant ${m.id} does not match ${file} at ${m.line}:${m.column} (stale mutant)`);
    tokens[m.id] = tokenFor(m.id, salt);
    edits.push(mutantEdit(m, tokens[m.id]!, h, typed, asi));
  }
  const shebang = /^#![^\n]*\n?/.exec(source)?.[0] ?? '';
  const body = renderEdits(source, edits).slice(shebang.length);
  const tail = body.endsWith('\n') ? '' : '\n';
  const text = `${shebang}// @ts-nocheck\n${body}${tail}${runtimeSource(h, file, stateKey, options.hitLimit ?? DEFAULT_HIT_LIMIT)}`;
  return { file, text, stateKey, tokens, functions: keys };
}
