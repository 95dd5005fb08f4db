import { canonicalJson } from '../../protocol/canonical.ts';
import type { CallOutput, Tree } from './recording.ts';

/*
 * The host's comparison of a replay: pure. Two strengths:
 * - exact: the reference against itself (recording and self-replays) must agree on every byte of the
 *   canonical form;
 * - behaviour: a candidate against the reference compares what a caller can observe of a value, with
 *   the freedom an honest rewrite has: the order of a Map's or a Set's entries (toEqual ignores it too),
 *   whether a plain object is frozen, an error's message text (its class and own state count; a
 *   test that checks the text checks it in the test run), and the own state of an instance of a class
 *   no other module exports (the target's own classes: an honest rewrite may keep other fields, as a
 *   test's `toEqual` between two of them allows; what a caller observes of such an instance goes
 *   through its recorded methods and getters). An instance of a class another module exports (`k`)
 *   keeps its state: the candidate computed it, the class is not the candidate's.
 */

function isNode(t: unknown): t is { $: string; [k: string]: unknown } {
  return t !== null && typeof t === 'object' && !Array.isArray(t);
}

/** The behaviour-relevant projection of a tree (see above). */
export function behaviour(tree: unknown): unknown {
  if (Array.isArray(tree)) return tree.map(behaviour);
  if (!isNode(tree)) return tree;
  const mapValues = (v: unknown) =>
    Object.fromEntries(
      Object.entries((v ?? {}) as Record<string, unknown>).map(([k, x]) => [k, behaviour(x)]),
    );
  const sorted = (xs: unknown[]) =>
    xs
      .map((x) => [canonicalJson(x), x] as const)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([, x]) => x);
  switch (tree.$) {
    case 'obj':
      return { $: 'obj', v: mapValues(tree.v) };
    case 'inst':
      return tree.k ? { $: 'inst', c: tree.c, k: tree.k, v: mapValues(tree.v) } : { $: 'inst', c: tree.c };
    case 'err':
      return { $: 'err', c: tree.c, v: mapValues(tree.v) };
    case 'map':
      return { $: 'map', v: sorted((tree.v as unknown[][]).map((e) => e.map(behaviour))) };
    case 'set':
      return { $: 'set', v: sorted((tree.v as unknown[]).map(behaviour)) };
    default:
      return tree;
  }
}

/** The canonical text of a call's outputs, exact or behaviour-projected. */
export function outputKey(o: CallOutput, mode: 'exact' | 'behaviour'): string {
  const p = mode === 'exact' ? (t: unknown) => t : behaviour;
  const out = 'r' in o.out ? { r: p(o.out.r) } : { t: p(o.out.t) };
  const settled =
    o.settled === undefined
      ? null
      : 'ok' in o.settled
        ? { ok: p(o.settled.ok) }
        : 'err' in o.settled
          ? { err: p(o.settled.err) }
          : { pending: true };
  return canonicalJson({
    out,
    after: o.after.map(p),
    selfAfter: o.selfAfter === undefined ? null : p(o.selfAfter),
    settled,
  });
}

/** What a replay box gave back for one call. */
export interface ReplayedCall {
  i: number;
  output?: CallOutput;
  /** The call was not performed (its inputs could not be rebuilt, or the box left it out). */
  missing?: string;
}

/** One expected call of the answer key. */
export interface ExpectedCall {
  /** Test file (box-relative). */
  file: string;
  i: number;
  /** The test that made the call (`describe > it`), or null outside any test. */
  test: string | null;
  /** The call's name in reports (callName()). */
  name: string;
  output: CallOutput;
}

export interface Difference {
  file: string;
  i: number;
  test: string | null;
  name: string;
  /** What differs, for people: the first differing part, short. */
  detail: string;
}

const short = (s: string, n = 120) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** What differs between an expected and an actual output, in one short line. */
export function describeDifference(
  expected: CallOutput,
  actual: CallOutput | undefined,
  missing?: string,
): string {
  if (!actual) return `not performed (${missing ?? 'no output'})`;
  const e = JSON.parse(outputKey(expected, 'behaviour')) as Record<string, unknown>;
  const a = JSON.parse(outputKey(actual, 'behaviour')) as Record<string, unknown>;
  for (const part of ['out', 'settled', 'after', 'selfAfter']) {
    const es = canonicalJson(e[part]);
    const as = canonicalJson(a[part]);
    if (es !== as) return `${part}: expected ${short(es)}, got ${short(as)}`;
  }
  return 'differs';
}

/**
 * Compares a candidate's replayed calls with the reference's expected ones (behaviour strength).
 * A call the box did not report, or could not perform, differs.
 */
export function compareReplay(
  expected: ExpectedCall[],
  actual: Map<string, ReplayedCall>,
  keyOf: (file: string, i: number) => string,
): Difference[] {
  const out: Difference[] = [];
  for (const e of expected) {
    const a = actual.get(keyOf(e.file, e.i));
    const same =
      a?.output !== undefined && outputKey(a.output, 'behaviour') === outputKey(e.output, 'behaviour');
    if (!same)
      out.push({
        file: e.file,
        i: e.i,
        test: e.test,
        name: e.name,
        detail: describeDifference(e.output, a?.output, a?.missing),
      });
  }
  return out;
}

/** A difference in one line: `src/a.test.ts #12 .add() in "Money > adds": out: expected …, got …`. */
export function formatDifference(d: Difference): string {
  return `${d.file} #${d.i} ${d.name}${d.test ? ` in "${d.test}"` : ''}: ${d.detail}`;
}

export type { Tree };
