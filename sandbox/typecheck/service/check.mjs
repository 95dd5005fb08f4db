// One request: the overlay's program (built on the base program), the diagnostics tsc would report
// for it (those the overlay can change recomputed, the others taken from the base), and the target's
// exported API.
import { resolve } from 'node:path';
import { affectedFiles } from './affected.mjs';
import { formatDiagnostics } from './diagnostics.mjs';
import { exportedApi } from './exported-api.mjs';
import { createOverlayHost } from './host.mjs';
import { reportsDeclarationDiagnostics } from './project.mjs';
import { declarationShape, shapeReferences } from './shape.mjs';

/** Most diagnostics returned per answer (the count is always exact). */
const MAX_DIAGNOSTICS = 500;

/**
 * @param {import('./project.mjs').Project} project
 * @param {Map<string, string>} overlay absolute file name → text
 * @returns {import('typescript').Program}
 */
function overlayProgram(project, overlay) {
  if (overlay.size === 0) return project.program;
  const { ts, parsed } = project;
  // Always the BASE program as oldProgram: every candidate is checked against the same workspace.
  return ts.createProgram({
    rootNames: parsed.fileNames,
    options: parsed.options,
    projectReferences: parsed.projectReferences,
    host: createOverlayHost(ts, project.host, overlay),
    oldProgram: project.program,
    configFileParsingDiagnostics: project.configDiagnostics,
  });
}

/**
 * Declaration shapes of the base (cached for the service's life) against the overlay program's.
 * @param {import('./project.mjs').Project} project
 * @param {import('typescript').Program} next
 * @returns {import('./affected.mjs').Shapes}
 */
function shapes(project, next) {
  const { ts } = project;
  /** @type {Map<string, import('./shape.mjs').Shape | null>} */
  const nextShapes = new Map();
  const before = (/** @type {string} */ f) => {
    if (!project.shapes.has(f)) project.shapes.set(f, declarationShape(ts, project.program, f));
    return project.shapes.get(f) ?? null;
  };
  const after = (/** @type {string} */ f) => {
    if (!nextShapes.has(f)) nextShapes.set(f, declarationShape(ts, next, f));
    return nextShapes.get(f) ?? null;
  };
  return {
    changed: (f) => {
      const [a, b] = [before(f), after(f)];
      return a === null || b === null || a.text !== b.text;
    },
    references: (f) => {
      const b = after(f);
      return b === null ? null : shapeReferences(ts, next, project.host, f, b);
    },
  };
}

/**
 * The diagnostics of `tsc --noEmit` for `next`, in tsc's order of gates: config, then syntactic
 * (any syntax error stops there), then options and global, then (only if still none) semantic and, with
 * declarations on, declaration diagnostics. `fresh(file)` says whether a file's diagnostics are
 * recomputed on `next` or taken from the base.
 * @param {import('./project.mjs').Project} project
 * @param {import('typescript').Program} next
 * @param {(sf: import('typescript').SourceFile) => boolean} fresh
 */
function tscDiagnostics(project, next, fresh) {
  /** @param {'syntactic' | 'semantic' | 'declaration'} kind @param {(sf: import('typescript').SourceFile) => readonly import('typescript').Diagnostic[]} compute */
  const perFile = (kind, compute) =>
    next
      .getSourceFiles()
      .flatMap((sf) =>
        fresh(sf) ? compute(sf) : (project.baseline.get(sf.fileName)?.[kind] ?? compute(sf)),
      );
  const all = [...project.configDiagnostics];
  const gate = all.length;
  all.push(...perFile('syntactic', (sf) => next.getSyntacticDiagnostics(sf)));
  if (all.length === gate) {
    all.push(...next.getOptionsDiagnostics(), ...next.getGlobalDiagnostics());
    if (all.length === gate) {
      all.push(...perFile('semantic', (sf) => next.getSemanticDiagnostics(sf)));
      // Global diagnostics found while checking belong to the file that triggered them; one triggered
      // by a declaration-shape emit before its file's check would otherwise be in no file's list.
      all.push(...next.getGlobalDiagnostics());
    }
    if (reportsDeclarationDiagnostics(project.parsed.options) && all.length === gate)
      all.push(...perFile('declaration', (sf) => next.getDeclarationDiagnostics(sf)));
  }
  return all;
}

/**
 * @param {import('./project.mjs').Project} project
 * @param {{ overlay: Map<string, string>, target: string | null }} request paths already absolute
 */
export function checkOverlay(project, { overlay, target }) {
  const { ts } = project;
  const next = overlayProgram(project, overlay);
  const affected =
    next === project.program
      ? /** @type {const} */ ({ scope: 'affected', files: new Set() })
      : affectedFiles(ts, project.index, project.program, next, [...overlay.keys()], shapes(project, next));
  const fresh =
    affected.scope === 'all'
      ? () => true
      : (/** @type {import('typescript').SourceFile} */ sf) => affected.files.has(sf.fileName);
  const diagnostics = formatDiagnostics(ts, tscDiagnostics(project, next, fresh), project.root);
  return {
    status: diagnostics.length > 0 ? 'failed' : 'passed',
    diagnostics: diagnostics.slice(0, MAX_DIAGNOSTICS),
    diagnosticCount: diagnostics.length,
    scope: affected.scope,
    checkedFiles: affected.scope === 'all' ? next.getSourceFiles().length : affected.files.size,
    ...(affected.scope === 'all' ? { allReason: affected.reason } : {}),
    api: target === null ? null : exportedApi(ts, next, resolve(project.root, target)),
  };
}
