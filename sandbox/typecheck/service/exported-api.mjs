// The exported API of one file as the checker sees it: per export its meanings, printed types, call and
// construct signatures, public members, and whether `any`/`unknown` hides in it. Compared with the
// reference's by sandbox/typecheck/api.ts. Types are printed relative to the file (NoTruncation), and
// a signature's or class's own type parameter names are replaced by positions (%0, %c0) so renaming
// `T` to `U` is not a change.

/** @typedef {import('typescript')} TS */
/** @typedef {import('typescript').TypeChecker} Checker */
/** @typedef {import('typescript').Type} Type */
/** @typedef {import('typescript').Symbol} Sym */

/** How deep the any-search follows anonymous structure (types can be infinite). */
const ANY_DEPTH = 6;

/**
 * @typedef {object} Ctx
 * @property {TS} ts
 * @property {Checker} checker
 * @property {import('typescript').SourceFile} sf the file whose API is described
 * @property {(text: string) => string} norm type-parameter renaming for the current scope
 */

/**
 * @param {TS} ts
 * @param {import('typescript').Program} program
 * @param {string} fileName absolute file name in the program
 * @returns {{ language: 'ts' | 'js', exports: object[] } | null} null when the file is not in the program
 */
export function exportedApi(ts, program, fileName) {
  const sf = program.getSourceFile(fileName);
  if (!sf) return null;
  const checker = program.getTypeChecker();
  const language = /\.[cm]?jsx?$/.test(fileName) ? 'js' : 'ts';
  const moduleSymbol = checker.getSymbolAtLocation(sf);
  if (!moduleSymbol) return { language, exports: [] };
  /** @type {Ctx} */
  const ctx = { ts, checker, sf, norm: (t) => t };
  const exports = checker
    .getExportsOfModule(moduleSymbol)
    .map((sym) => describeExport(ctx, sym))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { language, exports };
}

/**
 * The meanings of a symbol, in a fixed order.
 * @param {TS} ts
 * @param {number} flags
 */
function kindsOf(ts, flags) {
  const F = ts.SymbolFlags;
  /** @type {string[]} */
  const kinds = [];
  if (flags & F.Class) kinds.push('class');
  if (flags & F.Enum) kinds.push('enum');
  if (flags & F.Function) kinds.push('function');
  if (flags & F.Variable) kinds.push('variable');
  if (flags & F.Interface) kinds.push('interface');
  if (flags & F.TypeAlias) kinds.push('type');
  if (flags & (F.ValueModule | F.NamespaceModule)) kinds.push('namespace');
  return kinds;
}

/**
 * @param {Ctx} ctx
 * @param {Sym} sym
 */
function typeOfSymbol(ctx, sym) {
  const c = ctx.checker;
  return typeof c.getTypeOfSymbol === 'function'
    ? c.getTypeOfSymbol(sym)
    : c.getTypeOfSymbolAtLocation(sym, ctx.sf);
}

/**
 * @param {Ctx} ctx
 * @param {Type} type
 * @param {boolean} [expandAlias] print a type alias's definition rather than its name
 */
function print(ctx, type, expandAlias = false) {
  const F = ctx.ts.TypeFormatFlags;
  const flags = F.NoTruncation | F.UseAliasDefinedOutsideCurrentScope | (expandAlias ? F.InTypeAlias : 0);
  return ctx.norm(ctx.checker.typeToString(type, ctx.sf, flags));
}

/**
 * @param {TS} ts
 * @param {Type} type
 * @returns {'any' | 'unknown' | null}
 */
function anyKind(ts, type) {
  if (type.flags & ts.TypeFlags.Any) return 'any';
  if (type.flags & ts.TypeFlags.Unknown) return 'unknown';
  return null;
}

/**
 * Is this named interface or class declared in the file itself? Its members are then this file's API
 * (an export typed through a private `interface Row { v: ReturnType<typeof JSON.parse> }`).
 * @param {Ctx} ctx
 * @param {Type} type
 */
function declaredHere(ctx, type) {
  const ref = /** @type {import('typescript').TypeReference} */ (type);
  const sym = (ref.target ?? type).symbol;
  return sym?.declarations?.some((d) => d.getSourceFile() === ctx.sf) ?? false;
}

/**
 * A property outside a type's public surface: private, protected, #private, or a class's `prototype`
 * (a generic class's `prototype` is typed `C<any>` by the language, not by the source).
 * @param {Ctx} ctx
 * @param {Type} type
 * @param {Sym} p
 */
function hiddenMember(ctx, type, p) {
  const { ts } = ctx;
  if (p.name === 'prototype' && type.symbol && type.symbol.flags & ts.SymbolFlags.Class) return true;
  if (p.name.startsWith('#') || String(p.escapedName).startsWith('__#')) return true;
  const d = p.valueDeclaration ?? p.declarations?.[0];
  const M = ts.ModifierFlags;
  return (
    d !== undefined && (ts.getCombinedModifierFlags(/** @type {any} */ (d)) & (M.Private | M.Protected)) !== 0
  );
}

/**
 * Whether `any` occurs in a type: the type itself, union/intersection members, type and alias
 * arguments (`Record<string, any>`, `any[]`, `Promise<any>`), the structure of anonymous object and
 * function types, and the public members of interfaces and classes declared in the file itself. Other
 * named interfaces and classes are not entered (their own members are not this export's: lib types
 * such as Promise have `any` inside).
 * @param {Ctx} ctx
 * @param {Type} type
 * @param {Set<Type>} [seen]
 * @param {number} [depth]
 * @returns {boolean}
 */
function containsAny(ctx, type, seen = new Set(), depth = 0) {
  const { ts, checker } = ctx;
  if (type.flags & ts.TypeFlags.Any) return true;
  if (seen.has(type) || depth > ANY_DEPTH) return false;
  seen.add(type);
  const inner = (/** @type {Type} */ t) => containsAny(ctx, t, seen, depth + 1);
  if (type.aliasTypeArguments?.some(inner)) return true;
  if (type.isUnionOrIntersection()) return type.types.some(inner);
  if (!(type.flags & ts.TypeFlags.Object)) return false;
  const objectFlags = /** @type {import('typescript').ObjectType} */ (type).objectFlags;
  if (
    objectFlags & ts.ObjectFlags.Reference &&
    checker.getTypeArguments(/** @type {import('typescript').TypeReference} */ (type)).some(inner)
  )
    return true;
  const local =
    objectFlags & (ts.ObjectFlags.Class | ts.ObjectFlags.Interface | ts.ObjectFlags.Reference) &&
    declaredHere(ctx, type);
  if (!local && !(objectFlags & (ts.ObjectFlags.Anonymous | ts.ObjectFlags.Mapped))) return false;
  const signatures = [
    ...checker.getSignaturesOfType(type, ts.SignatureKind.Call),
    ...checker.getSignaturesOfType(type, ts.SignatureKind.Construct),
  ];
  return (
    signatures.some(
      (s) =>
        inner(checker.getReturnTypeOfSignature(s)) || s.parameters.some((p) => inner(typeOfSymbol(ctx, p))),
    ) ||
    checker.getIndexInfosOfType(type).some((i) => inner(i.type)) ||
    checker.getPropertiesOfType(type).some((p) => !hiddenMember(ctx, type, p) && inner(typeOfSymbol(ctx, p)))
  );
}

/**
 * @param {Ctx} ctx
 * @param {Type} type
 */
function typeInfo(ctx, type) {
  return { type: print(ctx, type), anyKind: anyKind(ctx.ts, type), containsAny: containsAny(ctx, type) };
}

/**
 * Replaces whole-word type-parameter names by positions.
 * @param {Ctx} ctx
 * @param {readonly import('typescript').TypeParameter[] | undefined} params
 * @param {string} prefix
 * @returns {Ctx}
 */
function withTypeParams(ctx, params, prefix) {
  const names = (params ?? [])
    .map((p) => p.symbol?.name)
    .filter((n) => typeof n === 'string' && n.length > 0);
  if (names.length === 0) return ctx;
  const outer = ctx.norm;
  const patterns = names.map(
    (n, i) =>
      /** @type {const} */ ([
        new RegExp(`(?<![\\w$])${n.replace(/\$/g, '\\$')}(?![\\w$])`, 'g'),
        `%${prefix}${i}`,
      ]),
  );
  return { ...ctx, norm: (t) => patterns.reduce((s, [re, to]) => s.replace(re, to), outer(t)) };
}

/**
 * @param {Ctx} outer
 * @param {import('typescript').Signature} sig
 */
function describeSignature(outer, sig) {
  const { ts, checker } = outer;
  const ctx = withTypeParams(outer, sig.typeParameters, '');
  const decl = sig.declaration;
  const params = sig.parameters.map((p) => {
    const d = p.valueDeclaration;
    const isParam = d !== undefined && ts.isParameter(d);
    return {
      name: p.name,
      ...typeInfo(ctx, typeOfSymbol(ctx, p)),
      optional: isParam ? checker.isOptionalParameter(d) : (p.flags & ts.SymbolFlags.Optional) !== 0,
      rest: isParam ? d.dotDotDotToken !== undefined : false,
      annotated: isParam ? d.type !== undefined || ts.getJSDocType(d) !== undefined : true,
    };
  });
  const returnAnnotated =
    decl !== undefined &&
    (('type' in decl && decl.type !== undefined) || ts.getJSDocReturnType(decl) !== undefined);
  return {
    typeParameters: (sig.typeParameters ?? []).map((t) => print(ctx, t)),
    params,
    returns: typeInfo(ctx, checker.getReturnTypeOfSignature(sig)),
    returnAnnotated,
  };
}

/**
 * @param {Ctx} ctx
 * @param {Type} type
 * @param {import('typescript').SignatureKind} kind
 */
function signatures(ctx, type, kind) {
  return ctx.checker.getSignaturesOfType(type, kind).map((s) => describeSignature(ctx, s));
}

/**
 * Public (not private, protected or #private) members of an object type.
 * @param {Ctx} ctx
 * @param {Type} type
 * @param {boolean} isStatic
 */
function members(ctx, type, isStatic) {
  const { ts, checker } = ctx;
  const M = ts.ModifierFlags;
  return checker
    .getPropertiesOfType(type)
    .filter((p) => {
      const d = p.valueDeclaration ?? p.declarations?.[0];
      if (p.name.startsWith('#') || String(p.escapedName).startsWith('__#')) return false;
      if (isStatic && p.name === 'prototype') return false;
      return !d || (ts.getCombinedModifierFlags(/** @type {any} */ (d)) & (M.Private | M.Protected)) === 0;
    })
    .map((p) => {
      const d = p.valueDeclaration ?? p.declarations?.[0];
      const t = typeOfSymbol(ctx, p);
      const F = ts.SymbolFlags;
      const kind = p.flags & F.Method ? 'method' : p.flags & F.Accessor ? 'accessor' : 'property';
      return {
        name: p.name,
        static: isStatic,
        kind,
        optional: (p.flags & F.Optional) !== 0,
        ...typeInfo(ctx, t),
        annotated: d !== undefined && 'type' in d && d.type !== undefined,
        signatures: kind === 'method' ? signatures(ctx, t, ts.SignatureKind.Call) : [],
      };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * @param {Ctx} ctx
 * @param {Sym} exported
 */
function describeExport(ctx, exported) {
  const { ts, checker } = ctx;
  const F = ts.SymbolFlags;
  const sym = exported.flags & F.Alias ? checker.getAliasedSymbol(exported) : exported;
  const kinds = kindsOf(ts, sym.flags);
  const valueType = sym.flags & F.Value ? typeOfSymbol(ctx, sym) : null;
  const isClass = (sym.flags & F.Class) !== 0;
  const declared =
    sym.flags & (F.Class | F.Interface | F.TypeAlias | F.Enum) ? checker.getDeclaredTypeOfSymbol(sym) : null;
  const classCtx =
    declared && isClass ? withTypeParams(ctx, /** @type {any} */ (declared).typeParameters, 'c') : ctx;
  const own = /** @type {any[]} */ ([]);
  // Interfaces, classes and aliases of object literal types list their members (so `interface` ↔ `type`
  // compare); an alias of anything else (a tuple, a union) is compared by its printed definition.
  const objectAlias =
    sym.flags & F.TypeAlias &&
    declared &&
    declared.flags & ts.TypeFlags.Object &&
    /** @type {import('typescript').ObjectType} */ (declared).objectFlags & ts.ObjectFlags.Anonymous;
  if (declared && (sym.flags & (F.Class | F.Interface) || objectAlias))
    own.push(...members(classCtx, declared, false));
  if (valueType && isClass) own.push(...members(classCtx, valueType, true));
  if (sym.flags & F.Enum && valueType) own.push(...members(ctx, valueType, true));
  if (sym.flags & (F.ValueModule | F.NamespaceModule) && valueType && !isClass)
    own.push(...members(ctx, valueType, true));
  const decl = sym.valueDeclaration;
  const aliasDefinition = sym.flags & F.TypeAlias && declared ? print(ctx, declared, true) : null;
  const types = [valueType, declared].filter((t) => t !== null);
  return {
    name: exported.name,
    kinds,
    type: valueType ? print(ctx, valueType) : null,
    declaredType: aliasDefinition,
    anyKind: types.map((t) => anyKind(ts, t)).find((k) => k !== null) ?? null,
    containsAny: types.some((t) => containsAny(ctx, t)) || own.some((m) => m.containsAny),
    annotated: decl !== undefined && ts.isVariableDeclaration(decl) && decl.type !== undefined,
    signatures: valueType ? signatures(ctx, valueType, ts.SignatureKind.Call) : [],
    constructSignatures: valueType ? signatures(classCtx, valueType, ts.SignatureKind.Construct) : [],
    members: own,
  };
}
