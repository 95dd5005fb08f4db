// A file's declaration shape: its .d.ts as TypeScript's declaration emitter writes it, comments removed.
// It is all an importer can see of the file, so when an overlaid file keeps its shape, no importer's
// diagnostics can change: only the file itself needs checking. (tsc's own incremental builder relies
// on the same rule, with the same emit call.) Comments are dropped because in a .d.ts they carry no
// types: JSDoc types of a JavaScript file are already written as TypeScript types there.

/**
 * @param {typeof import('typescript')} ts
 * @param {import('typescript').Program} program
 * @param {string} fileName
 * @returns {string | null} null when it cannot be computed (the caller then treats the shape as changed)
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
  return printer.printFile(ts.createSourceFile('shape.d.ts', text, ts.ScriptTarget.Latest));
}
