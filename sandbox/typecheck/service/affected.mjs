// Which files' diagnostics an overlay can change. A file's diagnostics depend only on the files it
// reaches through imports (of any form: import/export, `import type`, `import("…")` types, require,
// JSDoc imports in checked JS, triple-slash path and types references) and on the global scope; and of
// an imported file, only on its declaration shape (shape.mjs). So an overlay can change: the overlaid
// files; the importers of every file whose shape changed, where a file's shape changes when its .d.ts
// text does or when its .d.ts refers to a file whose shape changed (a barrel); files that enter the
// program through a new import; and EVERYTHING when a changed file or an importer of one contributes to
// the global scope (a script, `declare global`, `declare module "…"`) or the overlaid files' triple-slash
// references change. Whatever is unknown (no resolutions, a shape that cannot be emitted, a specifier
// that does not resolve) counts as changed: over-approximating only costs time.

/** @typedef {import('typescript')} TS */
/** @typedef {import('typescript').Program} Program */
/** @typedef {import('typescript').SourceFile} SourceFile */

/**
 * True when a file's declarations reach the global scope or merge into another module.
 * @param {TS} ts
 * @param {SourceFile} sf
 */
export function affectsGlobalScope(ts, sf) {
  if (sf.fileName.endsWith('.json')) return false;
  // commonJsModuleIndicator (internal, present since TS 2.x): a CommonJS JS file is a module too.
  const isModule = ts.isExternalModule(sf) || /** @type {any} */ (sf).commonJsModuleIndicator !== undefined;
  if (!isModule) return true;
  return sf.statements.some(
    (s) =>
      ts.isModuleDeclaration(s) &&
      (ts.isStringLiteral(s.name) || (s.flags & ts.NodeFlags.GlobalAugmentation) !== 0),
  );
}

/**
 * The triple-slash references of a file, as one comparable string.
 * @param {SourceFile | undefined} sf
 */
function tripleSlash(sf) {
  if (!sf) return '';
  const refs = [
    ...sf.referencedFiles.map((r) => `path:${r.fileName}`),
    ...sf.typeReferenceDirectives.map((r) => `types:${r.fileName}:${r.resolutionMode ?? ''}`),
    ...sf.libReferenceDirectives.map((r) => `lib:${r.fileName}`),
  ];
  return refs.join('\n');
}

/**
 * Resolved module and type-reference edges of a program, file name → file names it depends on. The
 * resolutions are the program's own (so `paths`, `exports`, `.js` → `.ts` are as tsc resolved them):
 * `program.forEachResolvedModule` (TS ≥ 5.3) or `sourceFile.resolvedModules` (older). Null when this
 * TypeScript exposes neither: then every request checks all files.
 * @param {Program} program
 * @returns {Array<[string, string]> | null}
 */
function resolvedEdges(program) {
  /** @type {Array<[string, string]>} */
  const edges = [];
  const byPath = new Map(
    program.getSourceFiles().map((sf) => [/** @type {any} */ (sf).path ?? sf.fileName, sf.fileName]),
  );
  const p = /** @type {any} */ (program);
  /** @param {any} r */
  const target = (r) =>
    r?.resolvedModule?.resolvedFileName ??
    r?.resolvedTypeReferenceDirective?.resolvedFileName ??
    r?.resolvedFileName;
  if (typeof p.forEachResolvedModule === 'function') {
    const add = (
      /** @type {any} */ r,
      /** @type {string} */ _name,
      /** @type {unknown} */ _mode,
      /** @type {string} */ filePath,
    ) => {
      const to = target(r);
      if (to) edges.push([byPath.get(filePath) ?? filePath, to]);
    };
    p.forEachResolvedModule(add);
    p.forEachResolvedTypeReferenceDirective?.(add);
    return edges;
  }
  let found = false;
  for (const sf of program.getSourceFiles()) {
    const s = /** @type {any} */ (sf);
    for (const cache of [s.resolvedModules, s.resolvedTypeReferenceDirectiveNames]) {
      if (!cache || typeof cache.forEach !== 'function') continue;
      found = true;
      cache.forEach((/** @type {any} */ r) => {
        const to = target(r);
        if (to) edges.push([sf.fileName, to]);
      });
    }
  }
  return found ? edges : null;
}

/**
 * `/// <reference path>` edges (resolved the way the program does: the path, or it with an extension).
 * @param {Program} program
 * @returns {Array<[string, string]>}
 */
function referencePathEdges(program) {
  /** @type {Array<[string, string]>} */
  const edges = [];
  for (const sf of program.getSourceFiles()) {
    const dir = sf.fileName.slice(0, sf.fileName.lastIndexOf('/'));
    for (const ref of sf.referencedFiles) {
      const base = ref.fileName.startsWith('/') ? ref.fileName : `${dir}/${ref.fileName}`;
      for (const ext of ['', '.ts', '.tsx', '.d.ts']) {
        const hit = program.getSourceFile(base + ext);
        if (hit) edges.push([sf.fileName, hit.fileName]);
      }
    }
  }
  return edges;
}

/**
 * @typedef {object} DependencyIndex
 * @property {Map<string, Set<string>> | null} importers file → files that depend on it directly (null: unknown)
 * @property {Set<string>} global files of the program that affect the global scope
 */

/**
 * Built once from the base program.
 * @param {TS} ts
 * @param {Program} program
 * @returns {DependencyIndex}
 */
export function dependencyIndex(ts, program) {
  const global = new Set(
    program
      .getSourceFiles()
      .filter((sf) => affectsGlobalScope(ts, sf))
      .map((sf) => sf.fileName),
  );
  const modules = resolvedEdges(program);
  if (!modules) return { importers: null, global };
  /** @type {Map<string, Set<string>>} */
  const importers = new Map();
  for (const [from, to] of [...modules, ...referencePathEdges(program)]) {
    const set = importers.get(to) ?? new Set();
    set.add(from);
    importers.set(to, set);
  }
  return { importers, global };
}

/**
 * @typedef {{ scope: 'all', reason: string } | { scope: 'affected', files: Set<string> }} Affected
 */

/**
 * What affectedFiles needs to know about declaration shapes (shape.mjs), base against overlay program.
 * @typedef {object} Shapes
 * @property {(file: string) => boolean} changed whether the file's .d.ts text changed (or is unknown)
 * @property {(file: string) => Set<string> | null} references the files its .d.ts refers to (null: unknown)
 */

/**
 * The files whose diagnostics must be computed on the new program (the others keep the base program's).
 * Importers see a file through its shape: the closure follows only files whose shape changed, or whose
 * shape refers to one that did (a barrel re-exporting it, an inferred type naming one of its types).
 * @param {TS} ts
 * @param {DependencyIndex} index
 * @param {Program} base
 * @param {Program} next the program with the overlay
 * @param {string[]} overlaid absolute file names of the overlaid files
 * @param {Shapes} shapes
 * @returns {Affected}
 */
export function affectedFiles(ts, index, base, next, overlaid, shapes) {
  const importers = index.importers;
  if (!importers) return { scope: 'all', reason: 'this TypeScript does not expose module resolutions' };
  const global = globalChange(ts, base, next, overlaid);
  if (global) return { scope: 'all', reason: global };
  const baseNames = new Set(base.getSourceFiles().map((sf) => sf.fileName));
  const added = next.getSourceFiles().filter((sf) => !baseNames.has(sf.fileName));
  const files = new Set(overlaid.filter((f) => baseNames.has(f)));
  /** Files whose shape, as their importers see it, changed. */
  const changed = new Set();
  /** @type {string[]} */
  const queue = [];
  const mark = (/** @type {string} */ f) => {
    changed.add(f);
    queue.push(f);
  };
  for (const f of files) if (shapes.changed(f)) mark(f);
  /** Importers of changed files whose own .d.ts text did not change. */
  const kept = new Set();
  const refersToChanged = (/** @type {string} */ f) => {
    const refs = shapes.references(f);
    return refs === null || [...refs].some((r) => changed.has(r));
  };
  for (;;) {
    for (let f = queue.pop(); f !== undefined; f = queue.pop())
      for (const importer of importers.get(f) ?? []) {
        if (index.global.has(importer))
          return { scope: 'all', reason: `${importer} imports a changed file and declares globals` };
        files.add(importer);
        if (changed.has(importer) || kept.has(importer)) continue;
        if (shapes.changed(importer)) mark(importer);
        else kept.add(importer);
      }
    // Until nothing moves: a kept shape that refers to a changed file changes for its importers too.
    const moved = [...kept].filter(refersToChanged);
    if (moved.length === 0) break;
    for (const f of moved) {
      kept.delete(f);
      mark(f);
    }
  }
  for (const sf of added) files.add(sf.fileName);
  return { scope: 'affected', files };
}

/**
 * Why an overlay can change the global scope (then every file is checked), or null.
 * @param {TS} ts
 * @param {Program} base
 * @param {Program} next
 * @param {string[]} overlaid
 */
function globalChange(ts, base, next, overlaid) {
  for (const f of overlaid) {
    const before = base.getSourceFile(f);
    const after = next.getSourceFile(f);
    if ((before && affectsGlobalScope(ts, before)) || (after && affectsGlobalScope(ts, after)))
      return `${f} is a script or declares globals or module augmentations`;
    if (tripleSlash(before) !== tripleSlash(after)) return `${f} changes its triple-slash references`;
  }
  const baseNames = new Set(base.getSourceFiles().map((sf) => sf.fileName));
  const nextNames = new Set(next.getSourceFiles().map((sf) => sf.fileName));
  const added = next.getSourceFiles().filter((sf) => !baseNames.has(sf.fileName));
  const removed = base.getSourceFiles().filter((sf) => !nextNames.has(sf.fileName));
  for (const sf of [...added, ...removed])
    if (affectsGlobalScope(ts, sf)) return `${sf.fileName} enters or leaves the program and declares globals`;
  return null;
}
