// The exported API of a target as the type-check service reads it from the checker
// (service/exported-api.mjs), and the pure comparison of a candidate's with the reference's.
//
// What is compared (each difference is one named reason; any difference scores 0):
// - every reference export must exist with the same meanings (kinds); `function` ↔ callable `variable`
//   (an arrow function) and `type` ↔ `interface` are interchangeable, since callers cannot tell;
// - a type that was not `any`/`unknown` must not become one, and a type free of `any` must not gain one
//   (`type Loose = any`, `ReturnType<typeof JSON.parse>`, `Record<string, any>`, `any[]`);
// - call and construct signatures: their number, and per signature the required and total parameter
//   counts, rest parameters, each parameter's type where the reference annotated it (elsewhere only
//   its loss to any/unknown), the return type where the reference annotated it (elsewhere only its loss
//   or gain of `any`);
// - public class (and interface, enum, namespace) members: missing ones, their kind, static-ness and
//   optionality, their type where the reference annotated it, their methods' signatures;
// - type aliases: the definition, printed;
// - what the candidate adds (exports, public members of the reference's exports): may be added, but must
//   not carry `any` anywhere in its type (TypeScript: inferred types too; JavaScript: what it annotates).
// JavaScript targets (language 'js'): types are inferred, and an unannotated parameter is `any` on both
// sides, so only what the reference declares is compared: exports and kinds, arity, and the types its
// JSDoc annotates. The any-checks of inferred types apply to TypeScript targets only.
// Printed types are compared as text (a signature's or class's type parameters renamed to positions):
// an equivalent type spelled through another alias counts as changed. Tasks state the signatures to
// keep, so a correct candidate keeps their spelling.
import ts from 'typescript';
import { z } from 'zod';

const TypeInfo = z.object({
  /** The type printed by the checker (NoTruncation). */
  type: z.string(),
  /** The type itself is `any` or `unknown`. */
  anyKind: z.enum(['any', 'unknown']).nullable(),
  /** `any` occurs in it (itself, members of unions, type arguments, anonymous structure). */
  containsAny: z.boolean(),
});

const ApiParam = TypeInfo.extend({
  name: z.string(),
  optional: z.boolean(),
  rest: z.boolean(),
  /** The source annotates it (a type annotation, or a JSDoc @param type in JS). */
  annotated: z.boolean(),
});

const ApiSignature = z.object({
  typeParameters: z.array(z.string()),
  params: z.array(ApiParam),
  returns: TypeInfo,
  /** The source annotates the return type. */
  returnAnnotated: z.boolean(),
});

const ApiMember = TypeInfo.extend({
  name: z.string(),
  static: z.boolean(),
  kind: z.enum(['method', 'property', 'accessor']),
  optional: z.boolean(),
  annotated: z.boolean(),
  signatures: z.array(ApiSignature),
});

export const EXPORT_KINDS = [
  'class',
  'enum',
  'function',
  'variable',
  'interface',
  'type',
  'namespace',
] as const;

const ApiExport = z.object({
  name: z.string(),
  /** Every meaning the exported name has (a class is also a type: only `class` is listed). */
  kinds: z.array(z.enum(EXPORT_KINDS)),
  /** The printed type of the value meaning (null for type-only exports). */
  type: z.string().nullable(),
  /** A type alias's definition, printed. */
  declaredType: z.string().nullable(),
  anyKind: z.enum(['any', 'unknown']).nullable(),
  containsAny: z.boolean(),
  /** A variable declared with a type annotation. */
  annotated: z.boolean(),
  signatures: z.array(ApiSignature),
  constructSignatures: z.array(ApiSignature),
  members: z.array(ApiMember),
});

/** The exported API of one file, as the service returns it. */
export const ExportedApiSchema = z.object({
  language: z.enum(['ts', 'js']),
  exports: z.array(ApiExport),
});

export type ExportedApi = z.infer<typeof ExportedApiSchema>;
export type ApiExportInfo = z.infer<typeof ApiExport>;
export type ApiSignatureInfo = z.infer<typeof ApiSignature>;
export type ApiMemberInfo = z.infer<typeof ApiMember>;
type TypeInfoT = z.infer<typeof TypeInfo>;

// Made on first use: an idle node does not load TypeScript (the package bundle loads it lazily).
let printerMemo: ts.Printer | undefined;
const printer = (): ts.Printer =>
  (printerMemo ??= ts.createPrinter({ removeComments: true, omitTrailingSemicolon: true }));
const canonicalCache = new Map<string, string>();

let scratchMemo: ts.SourceFile | undefined;
const SCRATCH = (): ts.SourceFile =>
  (scratchMemo ??= ts.createSourceFile('t.ts', '', ts.ScriptTarget.Latest));

/**
 * Sorts (and dedupes) the members of every union in a type node, recursively. Intersections keep their
 * order: it decides overload resolution when their members are callable.
 */
function sortUnions(node: ts.Node, context: ts.TransformationContext): ts.Node {
  const visited = ts.visitEachChild(node, (n) => sortUnions(n, context), context);
  if (!ts.isUnionTypeNode(visited)) return visited;
  const printed = new Map<string, ts.TypeNode>();
  for (const t of visited.types) printed.set(printer().printNode(ts.EmitHint.Unspecified, t, SCRATCH()), t);
  const sorted = [...printed.keys()].sort().map((k) => printed.get(k)!);
  return context.factory.updateUnionTypeNode(visited, context.factory.createNodeArray(sorted));
}

/**
 * A printed type with the members of its unions in a fixed order. The checker
 * prints a union in the order its types were created, which differs between two programs holding the
 * same declaration (`A | B` from one, `B | A` from the other): compared raw, an unchanged type would read
 * as changed. Text that does not parse as a type is returned as it is.
 */
export function canonicalType(text: string): string {
  const known = canonicalCache.get(text);
  if (known !== undefined) return known;
  const sf = ts.createSourceFile(
    't.ts',
    `type __T = ${text};`,
    ts.ScriptTarget.Latest,
    false,
    ts.ScriptKind.TS,
  );
  const decl = sf.statements[0];
  const diagnostics = (sf as unknown as { parseDiagnostics?: unknown[] }).parseDiagnostics ?? [];
  let out = text;
  if (sf.statements.length === 1 && decl && ts.isTypeAliasDeclaration(decl) && diagnostics.length === 0) {
    const result = ts.transform(decl.type, [(context) => (root) => sortUnions(root, context) as ts.TypeNode]);
    out = printer().printNode(ts.EmitHint.Unspecified, result.transformed[0]!, sf);
    result.dispose();
  }
  if (canonicalCache.size > 10_000) canonicalCache.clear();
  canonicalCache.set(text, out);
  return out;
}

/** Two printed types are the same type up to the order of union members. */
function sameType(a: string, b: string): boolean {
  return a === b || canonicalType(a) === canonicalType(b);
}

/** Whether inferred (unannotated) types are held to the any-rules: TypeScript targets only. */
interface Rules {
  inferred: boolean;
}

/** A type that lost itself to any/unknown, or gained an `any` it did not have. */
function anyLoss(where: string, ref: TypeInfoT, cand: TypeInfoT): string[] {
  if (ref.anyKind === null && cand.anyKind !== null)
    return [`${where}: type ${ref.type} became ${cand.anyKind}`];
  if (!ref.containsAny && cand.containsAny) return [`${where}: type ${cand.type} now contains any`];
  return [];
}

/** An annotated type compared as printed, any other type only for any-loss (where the rules ask). */
function typeChange(
  where: string,
  ref: TypeInfoT,
  cand: TypeInfoT,
  annotated: boolean,
  rules: Rules,
): string[] {
  const lost = annotated || rules.inferred ? anyLoss(where, ref, cand) : [];
  if (lost.length > 0) return lost;
  if (annotated && !sameType(ref.type, cand.type))
    return [`${where}: type changed from ${ref.type} to ${cand.type}`];
  return [];
}

function required(sig: ApiSignatureInfo): number {
  return sig.params.filter((p) => !p.optional && !p.rest).length;
}

function signatureDifferences(
  where: string,
  ref: ApiSignatureInfo,
  cand: ApiSignatureInfo,
  rules: Rules,
): string[] {
  const out: string[] = [];
  if (required(ref) !== required(cand))
    out.push(`${where}: required parameters changed from ${required(ref)} to ${required(cand)}`);
  if (ref.params.length !== cand.params.length)
    out.push(`${where}: parameters changed from ${ref.params.length} to ${cand.params.length}`);
  if (ref.typeParameters.length !== cand.typeParameters.length)
    out.push(
      `${where}: type parameters changed from ${ref.typeParameters.length} to ${cand.typeParameters.length}`,
    );
  ref.params.forEach((p, i) => {
    const c = cand.params[i];
    if (!c) return;
    const at = `${where} parameter ${i + 1} (${p.name})`;
    if (p.rest !== c.rest) out.push(`${at}: ${p.rest ? 'is no longer' : 'became'} a rest parameter`);
    // JS: an unannotated parameter is any on both sides; only a declared type can be lost.
    const lost = p.annotated || rules.inferred ? anyLoss(at, p, c) : [];
    if (lost.length > 0) out.push(...lost);
    else if (p.annotated && !sameType(p.type, c.type))
      out.push(`${at}: type changed from ${p.type} to ${c.type}`);
  });
  out.push(...typeChange(`${where} return`, ref.returns, cand.returns, ref.returnAnnotated, rules));
  return out;
}

function signatureListDifferences(
  where: string,
  ref: ApiSignatureInfo[],
  cand: ApiSignatureInfo[],
  rules: Rules,
): string[] {
  if (ref.length !== cand.length) return [`${where}: ${ref.length} signature(s) became ${cand.length}`];
  return ref.flatMap((r, i) =>
    signatureDifferences(ref.length > 1 ? `${where} (overload ${i + 1})` : where, r, cand[i]!, rules),
  );
}

/** `any` in a type the rules hold (every type of a TypeScript target; a JavaScript one's annotations). */
function carriesAny(t: TypeInfoT, annotated: boolean, rules: Rules): boolean {
  return (annotated || rules.inferred) && (t.anyKind === 'any' || t.containsAny);
}

/** Where `any` sits in signatures the reference has no counterpart of. */
function anyInSignatures(where: string, sigs: ApiSignatureInfo[], rules: Rules): string[] {
  return sigs.flatMap((sig, i) => {
    const at = sigs.length > 1 ? `${where} (overload ${i + 1})` : where;
    const params = sig.params
      .filter((p) => carriesAny(p, p.annotated, rules))
      .map((p) => `${at} parameter ${p.name}: ${p.type}`);
    return carriesAny(sig.returns, sig.returnAnnotated, rules)
      ? [...params, `${at} return: ${sig.returns.type}`]
      : params;
  });
}

/** Where `any` sits in a member the reference does not have. */
function anyInMember(where: string, m: ApiMemberInfo, rules: Rules): string[] {
  if (m.kind === 'method') return anyInSignatures(where, m.signatures, rules);
  return carriesAny(m, m.annotated, rules) ? [`${where}: ${m.type}`] : [];
}

/**
 * An export (or a public member) the reference does not have may be added, as a helper or a type a
 * rewrite names, but it is API all the same: it must not carry `any` (however spelt), where the
 * reference's exports may not gain it either. `unknown` is allowed: it is checked at every use.
 */
function addedExportDifferences(cand: ApiExportInfo, rules: Rules): string[] {
  const at = `added export ${cand.name}`;
  const declared = cand.declaredType !== null || cand.annotated;
  const found = [
    ...(carriesAny(typeOf(cand), declared, rules) &&
    cand.signatures.length + cand.constructSignatures.length + cand.members.length === 0
      ? [`${at}: ${cand.type ?? cand.declaredType}`]
      : []),
    ...anyInSignatures(at, cand.signatures, rules),
    ...anyInSignatures(`${at} constructor`, cand.constructSignatures, rules),
    ...cand.members.flatMap((m) =>
      anyInMember(`${at} member ${m.static ? 'static ' : ''}${m.name}`, m, rules),
    ),
  ];
  // An inferred `any` the parts above do not show (a TypeScript target): name the export itself.
  if (found.length === 0 && rules.inferred && (cand.containsAny || cand.anyKind === 'any'))
    found.push(`${at}: ${cand.type ?? cand.declaredType}`);
  return found.map((f) => `${f} carries any`);
}

function memberDifferences(
  where: string,
  ref: ApiMemberInfo[],
  cand: ApiMemberInfo[],
  rules: Rules,
): string[] {
  const key = (m: ApiMemberInfo) => `${m.static ? 'static ' : ''}${m.name}`;
  const byKey = new Map(cand.map((m) => [key(m), m]));
  const known = new Set(ref.map(key));
  const added = cand
    .filter((c) => !known.has(key(c)))
    .flatMap((c) => anyInMember(`${where} added member ${key(c)}`, c, rules).map((f) => `${f} carries any`));
  return [
    ...added,
    ...ref.flatMap((r) => {
      const at = `${where} member ${key(r)}`;
      const c = byKey.get(key(r));
      if (!c) return [`${at}: missing`];
      const out: string[] = [];
      // A getter-only accessor and a readonly property read alike; a method is called, a property not.
      if ((r.kind === 'method') !== (c.kind === 'method')) out.push(`${at}: ${r.kind} became ${c.kind}`);
      if (r.optional !== c.optional) out.push(`${at}: ${r.optional ? 'no longer' : 'became'} optional`);
      if (r.kind === 'method' && c.kind === 'method')
        out.push(...signatureListDifferences(at, r.signatures, c.signatures, rules));
      else out.push(...typeChange(at, r, c, r.annotated, rules));
      return out;
    }),
  ];
}

/** Kinds equal up to the interchangeable pairs (function ↔ callable variable, type ↔ interface). */
function sameKinds(ref: ApiExportInfo, cand: ApiExportInfo): boolean {
  const norm = (e: ApiExportInfo) =>
    [
      ...new Set(
        e.kinds.map((k) =>
          k === 'variable' && e.signatures.length > 0 ? 'function' : k === 'interface' ? 'type' : k,
        ),
      ),
    ]
      .sort()
      .join('+');
  return norm(ref) === norm(cand);
}

function exportDifferences(ref: ApiExportInfo, cand: ApiExportInfo, rules: Rules): string[] {
  const at = `export ${ref.name}`;
  if (!sameKinds(ref, cand)) return [`${at}: ${ref.kinds.join('+')} became ${cand.kinds.join('+')}`];
  const out: string[] = [];
  // Callables and classes are compared part by part below; a plain value or type as a whole.
  const whole = ref.signatures.length + ref.constructSignatures.length + ref.members.length === 0;
  const declared = ref.declaredType !== null || ref.annotated;
  if (whole && (declared || rules.inferred)) out.push(...anyLoss(at, typeOf(ref), typeOf(cand)));
  if (ref.annotated && whole && !sameType(ref.type ?? '', cand.type ?? ''))
    out.push(`${at}: type changed from ${ref.type} to ${cand.type}`);
  if (
    ref.declaredType !== null &&
    cand.declaredType !== null &&
    !sameType(ref.declaredType, cand.declaredType)
  )
    out.push(`${at}: type changed from ${ref.declaredType} to ${cand.declaredType}`);
  out.push(...signatureListDifferences(at, ref.signatures, cand.signatures, rules));
  out.push(
    ...signatureListDifferences(
      `${at} constructor`,
      ref.constructSignatures,
      cand.constructSignatures,
      rules,
    ),
  );
  out.push(...memberDifferences(at, ref.members, cand.members, rules));
  return [...new Set(out)];
}

function typeOf(e: ApiExportInfo): TypeInfoT {
  return { type: e.type ?? e.declaredType ?? '', anyKind: e.anyKind, containsAny: e.containsAny };
}

/**
 * Why the candidate's exported API is not the reference's: one named reason per difference, empty when
 * it keeps every export with its kind, arity and types, and what it adds (exports, public members of
 * the reference's exports) carries no `any`.
 */
export function apiDifferences(reference: ExportedApi, candidate: ExportedApi): string[] {
  const rules: Rules = { inferred: reference.language === 'ts' };
  const byName = new Map(candidate.exports.map((e) => [e.name, e]));
  const known = new Set(reference.exports.map((e) => e.name));
  return [
    ...reference.exports.flatMap((r) => {
      const c = byName.get(r.name);
      return c ? exportDifferences(r, c, rules) : [`export ${r.name}: missing`];
    }),
    ...candidate.exports.filter((c) => !known.has(c.name)).flatMap((c) => addedExportDifferences(c, rules)),
  ];
}
