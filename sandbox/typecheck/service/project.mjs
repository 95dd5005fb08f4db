// The project a service serves: the tsconfig parsed once (as `tsc` parses it: command-line options
// over the file, `extends`, `paths`, project references), the base program built once, and every base
// diagnostic computed once, per file, so a request recomputes only what its overlay can change.

import { dependencyIndex } from './affected.mjs';
import { ServiceInputError, tscCommandLine } from './args.mjs';
import { createCachingHost } from './host.mjs';

/**
 * @typedef {object} FileDiagnostics
 * @property {readonly import('typescript').Diagnostic[]} syntactic
 * @property {readonly import('typescript').Diagnostic[]} semantic
 * @property {readonly import('typescript').Diagnostic[]} declaration only computed when tsc would report them
 */

/**
 * @typedef {object} Project
 * @property {typeof import('typescript')} ts
 * @property {string} root workspace root
 * @property {string} configPath absolute tsconfig path
 * @property {import('typescript').ParsedCommandLine} parsed
 * @property {import('typescript').CompilerHost} host the caching host
 * @property {readonly import('typescript').Diagnostic[]} configDiagnostics
 * @property {import('typescript').Program} program the base program (every request's oldProgram)
 * @property {Map<string, FileDiagnostics>} baseline per file name
 * @property {import('./affected.mjs').DependencyIndex} index
 * @property {Map<string, import('./shape.mjs').Shape | null>} shapes declaration shapes of base files, computed when first needed
 */

/**
 * True when `tsc --noEmit` also reports declaration-emit diagnostics (declaration or composite on).
 * @param {import('typescript').CompilerOptions} options
 */
export function reportsDeclarationDiagnostics(options) {
  return options.noEmit === true && (options.declaration === true || options.composite === true);
}

/**
 * @param {typeof import('typescript')} ts
 * @param {{ root: string, tscArgs: string[] }} args
 * @returns {Project}
 */
export function loadProject(ts, { root, tscArgs }) {
  const { configPath, options } = tscCommandLine(ts, tscArgs, root);
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, options, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new ServiceInputError(
        `tsconfig ${configPath}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`,
      );
    },
  });
  if (!parsed) throw new ServiceInputError(`tsconfig ${configPath}: cannot be read`);
  const host = createCachingHost(ts, parsed.options);
  const configDiagnostics = ts.getConfigFileParsingDiagnostics(parsed);
  const program = ts.createProgram({
    rootNames: parsed.fileNames,
    options: parsed.options,
    projectReferences: parsed.projectReferences,
    host,
    configFileParsingDiagnostics: configDiagnostics,
  });
  const declarations = reportsDeclarationDiagnostics(parsed.options);
  /** @type {Map<string, FileDiagnostics>} */
  const baseline = new Map();
  // In file order, as tsc checks them (a few diagnostics depend on the order types are resolved in).
  for (const sf of program.getSourceFiles())
    baseline.set(sf.fileName, {
      syntactic: program.getSyntacticDiagnostics(sf),
      semantic: program.getSemanticDiagnostics(sf),
      declaration: declarations ? program.getDeclarationDiagnostics(sf) : [],
    });
  return {
    ts,
    root,
    configPath,
    parsed,
    host,
    configDiagnostics,
    program,
    baseline,
    index: dependencyIndex(ts, program),
    shapes: new Map(),
  };
}
