// Compiler hosts: one caching host for the service's life, and a thin overlay host per request.

/**
 * Memoises a one-argument function (file-system questions): the workspace is bound read-only into the
 * service's sandbox and a service serves one workspace content, so an answer never goes stale.
 * @template T
 * @param {(key: string) => T} fn
 * @returns {(key: string) => T}
 */
function memo(fn) {
  const cache = new Map();
  return (key) => {
    if (cache.has(key)) return cache.get(key);
    const value = fn(key);
    cache.set(key, value);
    return value;
  };
}

/**
 * SourceFiles differ by the parse options the program asks for (module format under node16/nodenext).
 * @param {string} fileName
 * @param {import('typescript').ScriptTarget | import('typescript').CreateSourceFileOptions} langOrOptions
 */
function sourceFileKey(fileName, langOrOptions) {
  if (typeof langOrOptions !== 'object') return `${fileName}\0${langOrOptions}`;
  const o = langOrOptions;
  return `${fileName}\0${o.languageVersion}\0${o.impliedNodeFormat ?? ''}\0${o.jsDocParsingMode ?? ''}`;
}

/**
 * The base host: `ts.createCompilerHost` with file-system answers and SourceFiles cached. Handing a
 * later program the very SourceFile objects the base program holds is what lets `createProgram(...,
 * oldProgram)` reuse them unparsed and unbound: only the overlaid files are parsed per request.
 * @param {typeof import('typescript')} ts
 * @param {import('typescript').CompilerOptions} options
 * @returns {import('typescript').CompilerHost}
 */
export function createCachingHost(ts, options) {
  const host = ts.createCompilerHost(options);
  const realpathOf = host.realpath?.bind(host);
  const sourceFiles = new Map();
  return {
    ...host,
    fileExists: memo((f) => host.fileExists(f)),
    readFile: memo((f) => host.readFile(f)),
    directoryExists: memo((d) =>
      host.directoryExists ? host.directoryExists(d) : ts.sys.directoryExists(d),
    ),
    getDirectories: memo((d) => (host.getDirectories ? host.getDirectories(d) : [])),
    realpath: memo((p) => {
      try {
        return realpathOf ? realpathOf(p) : p;
      } catch {
        return p;
      }
    }),
    getSourceFile(fileName, langOrOptions, onError, shouldCreateNewSourceFile) {
      const key = sourceFileKey(fileName, langOrOptions);
      const hit = shouldCreateNewSourceFile ? undefined : sourceFiles.get(key);
      if (hit) return hit;
      const sf = host.getSourceFile(fileName, langOrOptions, onError, shouldCreateNewSourceFile);
      if (sf) sourceFiles.set(key, sf);
      return sf;
    },
  };
}

/**
 * A host that answers the overlay's text for the overlaid files and the base host for everything else.
 * An overlaid file is also recognised under another name for the same real file (a symlink), so the
 * candidate cannot reach the reference's text through an alias path.
 * @param {typeof import('typescript')} ts
 * @param {import('typescript').CompilerHost} base a host from createCachingHost
 * @param {Map<string, string>} overlay absolute file name → text (files that exist in the workspace)
 * @returns {import('typescript').CompilerHost}
 */
export function createOverlayHost(ts, base, overlay) {
  const realpath = (/** @type {string} */ p) => (base.realpath ? base.realpath(p) : p);
  const byRealpath = new Map([...overlay].map(([p, text]) => [realpath(p), text]));
  const textOf = (/** @type {string} */ f) =>
    overlay.get(f) ?? (base.fileExists(f) ? byRealpath.get(realpath(f)) : undefined);
  return {
    ...base,
    fileExists: (f) => textOf(f) !== undefined || base.fileExists(f),
    readFile: (f) => textOf(f) ?? base.readFile(f),
    getSourceFile(fileName, langOrOptions, onError, shouldCreateNewSourceFile) {
      const text = textOf(fileName);
      if (text === undefined)
        return base.getSourceFile(fileName, langOrOptions, onError, shouldCreateNewSourceFile);
      return ts.createSourceFile(fileName, text, langOrOptions);
    },
  };
}
