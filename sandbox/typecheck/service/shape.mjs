// A file's declaration shape: its .d.ts as TypeScript's declaration emitter writes it, comments removed,
// and the modules that .d.ts refers to. The .d.ts is all an importer can see of a file, so:
// - an importer's diagnostics can change only if the shape of a file it imports changed, or the shape
//   of a file that shape refers to (`export { x } from './f'`, `import("./f").T` in an inferred type);
// - an overlaid file that keeps its shape changes no importer's diagnostics.
// (tsc's own incremental builder reasons on shapes too, with the same emit call.) Comments are dropped
// because in a .d.ts they carry no types: a JavaScript file's JSDoc types are written as types there.
/**
 * @typedef {object} Shape
 * @property {string} text the .d.ts without comments
 * @property {string[]} specifiers the module specifiers it refers to (imports, re-exports, import types)
 */

/**
 * @param {typeof import('typescript')} ts
 * @param {import('typescript').Program} program
 * @param {string} fileName
 * @returns {Shape | null} null when it cannot be computed (the caller then treats the shape as changed)
 */
export function declarationShape(ts, program, fileName) {
  const sf = program.getSourceFile(fileName);
  if (!sf) return null;
  /** @type {string | null} */
  let text = null;
  try {
    // The sixth argument, forceDtsEmit (internal, stable since TS 4.x), emits declarations even under
    // noEmit and without `declaration`: what the builder uses to compute shapes.
    const emit = /** @type {(...args: unknown[]) => import('typescript').EmitResult} */ (program.emit);
    emit.call(
      program,
      sf,
      (/** @type {string} */ name, /** @type {string} */ data) => {
        if (/\.d\.[cm]?ts$/.test(name)) text = data;
      },
      undefined,
      true,
      undefined,
      true,
    );
  } catch {
    return null;
  }
  if (text === null) return null;
  const printer = ts.createPrinter({ removeComments: true });
  return {
    text: printer.printFile(ts.createSourceFile('shape.d.ts', text, ts.ScriptTarget.Latest)),
    specifiers: ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName),
  };
}

/**
 * The program files a shape refers to, resolved as modules from the file's own folder (a .d.ts is
 * emitted next to its source); null when one does not resolve (the caller then assumes it refers to
 * anything).
 * @param {typeof import('typescript')} ts
 * @param {import('typescript').Program} program
 * @param {import('typescript').CompilerHost} host
 * @param {string} fileName
 * @param {Shape} shape
 * @returns {Set<string> | null}
 */
export function shapeReferences(ts, program, host, fileName, shape) {
  const sf = program.getSourceFile(fileName);
  if (!sf) return null;
  const options = program.getCompilerOptions();
  /** @type {Set<string>} */
  const out = new Set();
  for (const spec of shape.specifiers) {
    const resolved = ts.resolveModuleName(
      spec,
      fileName,
      options,
      host,
      undefined,
      undefined,
      sf.impliedNodeFormat,
    ).resolvedModule?.resolvedFileName;
    if (!resolved) return null;
    out.add(program.getSourceFile(resolved)?.fileName ?? resolved);
  }
  return out;
}
