// What `npm run build` bundles and how (pure: no file system, no esbuild). scripts/build.ts runs it.
import ts from 'typescript';

/** One bundle the build writes. */
export interface BundleEntry {
  /** Source entry point, relative to the repository root. */
  in: string;
  /** Output file, relative to the repository root (under dist/). */
  out: string;
  /** Where it runs: a CLI binary (node) or a page the loopback server serves (browser). */
  platform: 'node' | 'browser';
}

/**
 * Every bundle of the package. A binary is one `node` entry (its commands are split into lazily loaded
 * chunks next to it); a web page is one `browser` entry. Node entries must stay directly in dist/:
 * their chunks land there too, and source paths are mapped from that folder (see sourceUrlExpression).
 */
export const ENTRIES: readonly BundleEntry[] = [
  { in: 'cli/main.ts', out: 'dist/vtnode.js', platform: 'node' },
  // The web view's page (node/ui/assets.ts serves dist/ui/app.js beside the program when it exists).
  { in: 'node/ui/web/main.tsx', out: 'dist/ui/app.js', platform: 'browser' },
];

/**
 * Packages left outside the node bundle, installed beside it (package.json `bundleDependencies`, so a
 * global install from the tarball still fetches nothing):
 * - typescript: the scorer type-checks candidates with it in a separate sandboxed process that loads
 *   it by path (sandbox/typecheck/resolve-typescript.mjs) and binds its package folder read-only, so a
 *   real package folder must exist; bundling its 9 MB into the chunks as well would only add a copy.
 */
export const EXTERNAL: readonly string[] = ['typescript'];

/**
 * The module the node bundle imports for `typescript`: the real package, loaded on first use. Every
 * source module imports it as `import ts from 'typescript'` at the top, but only scoring, mining and
 * auditing use it: an idle node must not hold its 9 MB of code (tens of MiB resident). `ts` is a live
 * binding: after the first access it is the package itself, so hot paths pay no indirection.
 */
export const LAZY_TYPESCRIPT = `import { createRequire } from 'node:module';
const load = () => (ts = createRequire(import.meta.url)('typescript'));
let ts = new Proxy({}, {
  get: (_, key) => Reflect.get(load(), key),
  has: (_, key) => Reflect.has(load(), key),
  ownKeys: () => Reflect.ownKeys(load()),
  getOwnPropertyDescriptor: (_, key) => ({ ...Reflect.getOwnPropertyDescriptor(load(), key), configurable: true }),
  set: (_, key, value) => Reflect.set(load(), key, value),
});
export { ts as default };
`;

/**
 * Files the program reads or runs by path at run time, relative to the repository root (directories
 * end in `/`). They ship in the package at the same paths, so a module's `import.meta.url`, mapped by
 * the build to its source path (sourceUrlExpression), finds them where it does in the repository:
 * the sandbox harness, reporters and type-check service are loaded by the test runners and the
 * service process; the integrity digest (part of the evaluation fingerprint) hashes the sources of
 * the harness, mutation and tamper rules and the exported-API comparison, and the replay digest
 * hashes the replay's box runtime and host parts, so they must be
 * byte-identical to the repository's;
 * `mine` and `demo` default to the example corpus; `demo` spawns bin/vtnode.js.
 */
export const RUNTIME_FILES: readonly string[] = [
  'bin/',
  'sandbox/integrity/',
  'sandbox/mutation/',
  'sandbox/reporters/',
  'sandbox/replay/',
  'sandbox/typecheck/resolve-typescript.mjs',
  'sandbox/typecheck/service.mjs',
  'sandbox/typecheck/service/',
  'sandbox/typecheck/api.ts',
  'sandbox/tamper.ts',
  'sandbox/tamper-modules.ts',
  'sandbox/strength.ts',
  'examples/ledger/',
];

/** Parts of RUNTIME_FILES never packed (a corpus's installed dependencies). */
export const RUNTIME_EXCLUDES: readonly string[] = ['examples/ledger/node_modules'];

/**
 * The expression that replaces `import.meta.url` in the bundled module `rel` (its path relative to
 * the repository root): the URL that file has in the installed package, computed from the chunk's
 * own URL (every node chunk is directly in dist/, one level below the package root).
 */
export function sourceUrlExpression(rel: string): string {
  if (rel.startsWith('/') || rel.split('/').includes('..'))
    throw new Error(`sourceUrlExpression: "${rel}" is not a path inside the repository`);
  return `new URL(${JSON.stringify(`../${rel}`)}, import.meta.url).href`;
}

/**
 * `source` (the module at `rel`) with every `import.meta.url` expression replaced by
 * sourceUrlExpression(rel). Only real expressions: text in strings, templates and comments (code a
 * module generates) is left alone.
 */
export function mapImportMetaUrl(source: string, rel: string): string {
  if (!source.includes('import.meta')) return source;
  const file = ts.createSourceFile(rel, source, ts.ScriptTarget.Latest, true, scriptKind(rel));
  const spans: [number, number][] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isPropertyAccessExpression(node) &&
      node.name.text === 'url' &&
      ts.isMetaProperty(node.expression) &&
      node.expression.keywordToken === ts.SyntaxKind.ImportKeyword
    ) {
      spans.push([node.getStart(file), node.getEnd()]);
      return;
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  let out = source;
  const replacement = sourceUrlExpression(rel);
  for (const [start, end] of spans.reverse()) out = out.slice(0, start) + replacement + out.slice(end);
  return out;
}

function scriptKind(rel: string): ts.ScriptKind {
  if (rel.endsWith('.tsx')) return ts.ScriptKind.TSX;
  return /\.[cm]?ts$/.test(rel) ? ts.ScriptKind.TS : ts.ScriptKind.JS;
}

/** esbuild's loader for a source file. */
export function loaderFor(rel: string): 'ts' | 'tsx' | 'js' {
  if (rel.endsWith('.tsx')) return 'tsx';
  return /\.[cm]?ts$/.test(rel) ? 'ts' : 'js';
}
