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
 * Where the prebuilt bundle of the page sits: `npm run build` bundles `node/ui/web/main.tsx` to
 * `dist/ui/app.js` (and `app.css`). `moduleUrl` is this module's URL, which the package build keeps
 * at its source path (`<package>/node/ui/assets.ts`, scripts/bundle-plan.ts), hence `../../dist`.
 */
export function prebuiltApp(moduleUrl: string = import.meta.url): { js: string; css: string } {
  return {
    js: fileURLToPath(new URL('../../dist/ui/app.js', moduleUrl)),
    css: fileURLToPath(new URL('../../dist/ui/app.css', moduleUrl)),
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

/**
 * Bundles the sources when they are there (the repository: never a stale bundle from an earlier
 * build), else reads the prebuilt bundle (the package ships dist/ui, not the page's sources).
 */
export async function readAssets(
  moduleUrl: string = import.meta.url,
  sourceEntry: string = WEB_ENTRY,
): Promise<UiAssets> {
  const prebuilt = prebuiltApp(moduleUrl);
  if (existsSync(sourceEntry) || !existsSync(prebuilt.js)) return bundleApp(sourceEntry);
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
