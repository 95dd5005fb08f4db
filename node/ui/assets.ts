import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** The page's script and its style sheet. */
export interface UiAssets {
  js: string;
  css: string;
}

/** The page's source entry (bundled with esbuild when no prebuilt bundle exists). */
export const WEB_ENTRY = fileURLToPath(new URL('./web/main.tsx', import.meta.url));

/**
 * Where a prebuilt bundle of the page sits: `ui/app.js` (and `ui/app.css`) beside the program. In
 * a bundled build this module is part of dist/<binary>.js, so that is dist/ui/app.js: the build
 * bundles `node/ui/web/main.tsx` to `dist/ui/app.js`. From the sources the file does not exist.
 */
export function prebuiltApp(programUrl: string = import.meta.url): { js: string; css: string } {
  return {
    js: fileURLToPath(new URL('./ui/app.js', programUrl)),
    css: fileURLToPath(new URL('./ui/app.css', programUrl)),
  };
}

/** Bundles the page in memory with esbuild (a development dependency), minified, for browsers. */
export async function bundleApp(entry: string = WEB_ENTRY): Promise<UiAssets> {
  const esbuild = await import('esbuild');
  const out = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    outdir: '/ui',
    entryNames: 'app',
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    logLevel: 'silent',
  });
  const file = (ext: string) => out.outputFiles.find((f) => f.path.endsWith(ext))?.text ?? '';
  return { js: file('.js'), css: file('.css') };
}

/** Reads the prebuilt bundle when there is one, else bundles the sources. */
export async function readAssets(programUrl: string = import.meta.url): Promise<UiAssets> {
  const prebuilt = prebuiltApp(programUrl);
  if (!existsSync(prebuilt.js)) return bundleApp();
  return {
    js: await readFile(prebuilt.js, 'utf8'),
    css: existsSync(prebuilt.css) ? await readFile(prebuilt.css, 'utf8') : '',
  };
}

let cached: Promise<UiAssets> | null = null;

/** The page's assets, read or bundled once per process (on the first request); a failure is retried. */
export function loadAssets(): Promise<UiAssets> {
  cached ??= readAssets().catch((err: Error) => {
    cached = null;
    throw new Error(`the web view's bundle could not be built: ${err.message}`);
  });
  return cached;
}
