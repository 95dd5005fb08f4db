// `npm run build`: bundles the binaries (and pages) of scripts/bundle-plan.ts into dist/ with esbuild.
//   node scripts/build.ts [--out-root DIR] [--no-minify] [--metafile FILE]
import { readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build, type Metafile, type Plugin } from 'esbuild';
import {
  type BundleEntry,
  ENTRIES,
  EXTERNAL,
  LAZY_TYPESCRIPT,
  loaderFor,
  mapImportMetaUrl,
} from './bundle-plan.ts';

const REPO = dirname(dirname(fileURLToPath(import.meta.url)));

/** Rewrites `import.meta.url` in the repository's own modules to their path in the package. */
function sourceUrls(root: string): Plugin {
  return {
    name: 'vtnode-source-urls',
    setup(b) {
      b.onLoad({ filter: /\.(?:[cm]?[jt]s|tsx)$/ }, async (args) => {
        const rel = relative(root, args.path).split(sep).join('/');
        if (rel.startsWith('..') || rel.split('/').includes('node_modules')) return undefined;
        const source = await readFile(args.path, 'utf8');
        return { contents: mapImportMetaUrl(source, rel), loader: loaderFor(rel) };
      });
    },
  };
}

/** `import ts from 'typescript'` in the repository's modules gets LAZY_TYPESCRIPT (loads on first use). */
function lazyTypescript(root: string): Plugin {
  return {
    name: 'vtnode-lazy-typescript',
    setup(b) {
      b.onResolve({ filter: /^typescript$/ }, (args) => {
        const rel = relative(root, args.importer);
        if (rel.startsWith('..') || rel.split(sep).includes('node_modules')) return undefined;
        return { path: 'lazy-typescript', namespace: 'vtnode' };
      });
      b.onLoad({ filter: /^lazy-typescript$/, namespace: 'vtnode' }, () => ({
        contents: LAZY_TYPESCRIPT,
        loader: 'js',
        resolveDir: root,
      }));
    },
  };
}

// An ESM bundle of CommonJS dependencies needs `require` (for node: built-ins they require).
const NODE_BANNER =
  "import { createRequire as __vtnodeCreateRequire } from 'node:module'; const require = __vtnodeCreateRequire(import.meta.url);";

async function buildNode(entries: BundleEntry[], outRoot: string, minify: boolean): Promise<Metafile> {
  const outdir = join(outRoot, 'dist');
  for (const e of entries)
    if (dirname(e.out) !== 'dist') throw new Error(`${e.out}: node entries are written directly in dist/`);
  const result = await build({
    absWorkingDir: REPO,
    entryPoints: entries.map((e) => ({ in: e.in, out: e.out.slice('dist/'.length).replace(/\.js$/, '') })),
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    minify,
    sourcemap: true,
    external: [...EXTERNAL],
    banner: { js: NODE_BANNER },
    chunkNames: 'chunk-[hash]',
    plugins: [lazyTypescript(REPO), sourceUrls(REPO)],
    logLevel: 'warning',
    legalComments: 'linked',
    metafile: true,
  });
  return result.metafile;
}

async function buildBrowser(entry: BundleEntry, outRoot: string, minify: boolean): Promise<void> {
  await build({
    absWorkingDir: REPO,
    entryPoints: [entry.in],
    outfile: join(outRoot, entry.out),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify,
    sourcemap: true,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    logLevel: 'warning',
  });
}

/** Builds every entry into `outRoot`/dist (cleared first). */
export async function buildAll(options: {
  /** Folder that receives dist/ (the repository, or a copy of it). */
  outRoot: string;
  /** Minify the output (the package does; `--no-minify` for reading it). */
  minify: boolean;
  /** Where to write esbuild's metafile of the node bundle (which sources each chunk holds), if anywhere. */
  metafile?: string;
}): Promise<void> {
  await rm(join(options.outRoot, 'dist'), { recursive: true, force: true });
  const meta = await buildNode(
    ENTRIES.filter((e) => e.platform === 'node'),
    options.outRoot,
    options.minify,
  );
  if (options.metafile) await writeFile(options.metafile, JSON.stringify(meta));
  for (const e of ENTRIES.filter((e) => e.platform === 'browser'))
    await buildBrowser(e, options.outRoot, options.minify);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      'out-root': { type: 'string' },
      'no-minify': { type: 'boolean' },
      metafile: { type: 'string' },
    },
    strict: true,
  });
  const started = performance.now();
  await buildAll({
    outRoot: values['out-root'] ?? REPO,
    minify: !values['no-minify'],
    ...(values.metafile ? { metafile: values.metafile } : {}),
  });
  process.stderr.write(`built dist/ in ${Math.round(performance.now() - started)} ms\n`);
}
