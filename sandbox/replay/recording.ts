import { z } from 'zod';
import { canonicalJson } from '../../protocol/canonical.ts';
// The codec is plain JavaScript shared with the box (see runtime/codec.mjs).
import { unbuildable } from './runtime/codec.mjs';

/** A codec tree (runtime/codec.mjs): JSON, with tagged objects for everything JSON cannot say. */
export type Tree = null | boolean | number | string | Tree[] | { $: string; [k: string]: unknown };
const TAGS = [
  'u',
  'n',
  'big',
  'sym',
  'fn',
  'obj',
  'inst',
  'map',
  'set',
  'date',
  're',
  'err',
  'ta',
  'ab',
  'promise',
  'cycle',
  'trunc',
  'ref',
  'opaque',
] as const;
export const Tree: z.ZodType<Tree> = z.lazy(() =>
  z.union([
    z.null(),
    z.boolean(),
    z.number(),
    z.string(),
    z.array(Tree),
    z.object({ $: z.enum(TAGS) }).catchall(z.unknown()),
  ]),
);

/** A ref node: an object an earlier call (c) or an export (x) handed out, at path p inside it. */
export const Ref = z.object({
  $: z.literal('ref'),
  c: z.number().int().nonnegative().optional(),
  x: z.string().optional(),
  p: z.array(z.string()),
});
export type Ref = z.infer<typeof Ref>;

export const CallKind = z.enum(['fn', 'new', 'method', 'static', 'get']);

/** What a call gave back: its result (r) or what it threw (t). */
export const Outcome = z.union([z.object({ r: Tree }), z.object({ t: Tree })]);
/** How a returned promise settled (or that it did not). */
export const Settled = z.union([
  z.object({ ok: Tree }),
  z.object({ err: Tree }),
  z.object({ pending: z.literal(true) }),
]);

/** One line of a recording (runtime/record.mjs). */
const CallEvent = z.object({
  e: z.literal('call'),
  i: z.number().int().nonnegative(),
  /** The module called, when not the target: a setup call, performed again but not compared. */
  m: z.string().optional(),
  kind: CallKind,
  name: z.string(),
  test: z.string().nullable(),
  t: z.number(),
  pn: z.number(),
  self: Tree.optional(),
  args: z.array(Tree),
  out: Outcome,
  after: z.array(Tree),
  selfAfter: Tree.optional(),
});
const SettleEvent = z.union([
  z.object({ e: z.literal('settle'), i: z.number().int().nonnegative(), ok: Tree }),
  z.object({ e: z.literal('settle'), i: z.number().int().nonnegative(), err: Tree }),
]);

/** What a call's outputs are: compared between the reference and the candidate. */
export const CallOutput = z.object({
  out: Outcome,
  after: z.array(Tree),
  selfAfter: Tree.optional(),
  settled: Settled.optional(),
});
export type CallOutput = z.infer<typeof CallOutput>;

/** The inputs of one call, as the replay box gets them (no outputs). */
export const ScriptCall = z.object({
  i: z.number().int().nonnegative(),
  /** The module called (its key in the imports module), when not the target. */
  m: z.string().optional(),
  kind: CallKind,
  name: z.string(),
  t: z.number(),
  pn: z.number(),
  self: Tree.optional(),
  args: z.array(Tree),
  /** Paths inside this call's result that later calls name (`P…`: inside the settled value). */
  anchors: z.array(z.array(z.string())),
  /** Why the call cannot be performed (it is left out, not compared). */
  skip: z.string().optional(),
});
export type ScriptCall = z.infer<typeof ScriptCall>;

/** A recorded call: its inputs, its test, its outputs. */
export interface RecordedCall {
  input: ScriptCall;
  test: string | null;
  output: CallOutput;
}

/** A call's name in reports: `money()`, `new Money()`, `.add()`, `.total (getter)`. */
export function callName(c: Pick<ScriptCall, 'kind' | 'name'>): string {
  switch (c.kind) {
    case 'fn':
      return `${c.name}()`;
    case 'new':
      return `new ${c.name}()`;
    case 'get':
      return `.${c.name} (getter)`;
    default:
      return `.${c.name}()`;
  }
}

function refsIn(tree: unknown, out: Ref[]): void {
  if (tree === null || typeof tree !== 'object') return;
  if (Array.isArray(tree)) {
    for (const t of tree) refsIn(t, out);
    return;
  }
  const node = tree as { $?: string };
  if (node.$ === 'ref') {
    const r = Ref.safeParse(tree);
    if (r.success) out.push(r.data);
    return;
  }
  for (const v of Object.values(tree)) refsIn(v, out);
}

/**
 * Parses one test file's recording (JSON lines, untrusted text from a box) into its calls in order,
 * with the anchors later calls need and the reason a call cannot be replayed. Throws naming the line.
 */
export function parseRecording(text: string, file: string): RecordedCall[] {
  const calls: RecordedCall[] = [];
  const settled = new Map<number, z.infer<typeof Settled>>();
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  lines.forEach((line, n) => {
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      throw new Error(`recording of ${file}, line ${n + 1}: not JSON`);
    }
    const settle = SettleEvent.safeParse(json);
    if (settle.success) {
      const { e: _e, i, ...rest } = settle.data;
      settled.set(i, rest as z.infer<typeof Settled>);
      return;
    }
    const parsed = CallEvent.safeParse(json);
    if (!parsed.success)
      throw new Error(
        `recording of ${file}, line ${n + 1}: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`,
      );
    const c = parsed.data;
    if (c.i !== calls.length)
      throw new Error(`recording of ${file}, line ${n + 1}: call ${c.i} out of order`);
    const skip = [c.self, ...c.args].map((t) => (t === undefined ? null : unbuildable(t))).find((w) => w);
    calls.push({
      input: {
        i: c.i,
        ...(c.m !== undefined ? { m: c.m } : {}),
        kind: c.kind,
        name: c.name,
        t: c.t,
        pn: c.pn,
        ...(c.self !== undefined ? { self: c.self } : {}),
        args: c.args,
        anchors: [],
        ...(skip ? { skip } : {}),
      },
      test: c.test,
      output: {
        out: c.out,
        after: c.after,
        ...(c.selfAfter !== undefined ? { selfAfter: c.selfAfter } : {}),
      },
    });
  });
  for (const call of calls) {
    const s = settled.get(call.input.i);
    const isPromise = 'r' in call.output.out && isTag(call.output.out.r, 'promise');
    if (isPromise) call.output.settled = s ?? { pending: true };
  }
  addAnchors(calls);
  return calls;
}

const isTag = (t: unknown, tag: string) =>
  t !== null && typeof t === 'object' && !Array.isArray(t) && (t as { $?: unknown }).$ === tag;

/** Each call's anchors: the places in its result that later calls' inputs name. */
function addAnchors(calls: RecordedCall[]): void {
  const seen = calls.map(() => new Set<string>());
  for (const call of calls) {
    const refs: Ref[] = [];
    refsIn([call.input.self, call.input.args], refs);
    for (const r of refs) {
      if (r.c === undefined) continue;
      const target = calls[r.c];
      if (!target || r.c >= call.input.i) {
        call.input.skip ??= `it names call ${r.c}, which is not an earlier call`;
        continue;
      }
      const k = canonicalJson(r.p);
      if (seen[r.c]!.has(k)) continue;
      seen[r.c]!.add(k);
      target.input.anchors.push(r.p);
    }
  }
}
