// Module hooks of the replay's node mode (preloaded with --import). They add what a TypeScript
// workspace's imports assume beyond Node's own resolution and nothing else: `./x.js` naming `./x.ts`,
// extensionless and folder imports, and the tsconfig `paths` aliases (node-plan.json). They also give
// each judged test file a module graph of its own in one thread: a module imported with the query
// `?vtnode-file=<n>` passes it on to every box module it imports (not to node_modules), as the test
// runner gives each test file fresh modules; and each TypeScript file's types are stripped once
// (Node's own stripTypeScriptTypes) however many graphs load it, or taken already stripped from the
// plan (the host strips the files calibration saw loaded: the stripper's start is a tenth of a second
// of CPU in every run that loads it). Written by hand (not tsx or a bundler) because it runs inside the
// box, where only this folder and the workspace are ours to place, and because it must stay this small
// to be worth running instead of the workspace's own runner. Whatever it cannot reproduce the calibration sees (the self-replay differs), and the
// task's candidates are then replayed under vitest.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { registerHooks, stripTypeScriptTypes } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const DIR = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(DIR);
const plan = JSON.parse(readFileSync(join(DIR, 'node-plan.json'), 'utf8'));
/** tsconfig `paths`: { pattern, to: box-relative paths } (sandbox/replay/wrapper.ts, readPathAliases). */
const aliases = plan.aliases ?? [];

const SWAPS = [
  ['.js', ['.ts', '.tsx']],
  ['.mjs', ['.mts']],
  ['.cjs', ['.cts']],
  ['.jsx', ['.tsx']],
];
const SUFFIXES = ['.ts', '.mts', '.js', '.mjs', '/index.ts', '/index.mts', '/index.js'];

/** Other spellings of a path-like specifier, in the order TypeScript's bundler resolution tries them. */
function spellings(spec) {
  const out = [];
  for (const [from, tos] of SWAPS)
    if (spec.endsWith(from)) for (const to of tos) out.push(spec.slice(0, -from.length) + to);
  for (const s of SUFFIXES) out.push(spec.replace(/\/$/, '') + s);
  return out;
}

/** The box files an aliased specifier may name, as file URLs. */
function unaliased(spec) {
  const out = [];
  for (const a of aliases) {
    const star = a.pattern.indexOf('*');
    const pre = star < 0 ? a.pattern : a.pattern.slice(0, star);
    const post = star < 0 ? '' : a.pattern.slice(star + 1);
    const hit =
      star < 0
        ? spec === a.pattern
        : spec.startsWith(pre) && spec.endsWith(post) && spec.length >= pre.length + post.length;
    if (!hit) continue;
    const mid = star < 0 ? '' : spec.slice(pre.length, spec.length - post.length);
    for (const to of a.to) out.push(pathToFileURL(join(ROOT, to.replace('*', mid))).href);
  }
  return out;
}

/** The query that keeps one test file's modules apart, from a module URL (or ''). */
function graphOf(url) {
  const q = url ? new URL(url).searchParams.get('vtnode-file') : null;
  return q === null ? '' : `?vtnode-file=${encodeURIComponent(q)}`;
}

const BOX_URL = pathToFileURL(`${ROOT}/`).href;
/** A resolved box module (not a package) joins the importing module's graph. */
function inGraph(result, parentURL) {
  const graph = graphOf(parentURL);
  const url = result.url;
  if (!graph || !url.startsWith(BOX_URL) || url.includes('/node_modules/') || url.includes('?'))
    return result;
  return { ...result, url: url + graph };
}

/** Stripped sources by path: each file's types are stripped once, whatever graphs load it. */
const stripped = new Map();
/** Sources the host stripped beforehand, by the sha256 of their TypeScript text (node-plan.json). */
const prestripped = new Map(Object.entries(plan.stripped ?? {}));

/** The box-relative paths of the TypeScript files this run loaded (calibration keeps them). */
export function loadedTypeScript() {
  const paths = [...stripped.keys()].map((url) => fileURLToPath(url));
  return paths.filter((p) => p.startsWith(`${ROOT}/`)).map((p) => p.slice(ROOT.length + 1));
}

const pathLike = (spec) => /^(\.{1,2}\/|\/|file:)/.test(spec) || spec === '.' || spec === '..';
const RETRY = new Set(['ERR_MODULE_NOT_FOUND', 'ERR_UNSUPPORTED_DIR_IMPORT']);

function resolveSpelt(specifier, context, nextResolve) {
  let first;
  try {
    return nextResolve(specifier, context);
  } catch (err) {
    if (!RETRY.has(err?.code)) throw err;
    first = err;
  }
  const bases = [...unaliased(specifier), ...(pathLike(specifier) ? [specifier] : [])];
  for (const base of bases)
    for (const spec of [base, ...spellings(base)])
      try {
        return nextResolve(spec, context);
      } catch {
        // the next spelling
      }
  throw first;
}

registerHooks({
  resolve(specifier, context, nextResolve) {
    return inGraph(resolveSpelt(specifier, context, nextResolve), context.parentURL);
  },
  load(url, context, nextLoad) {
    const loaded = nextLoad(url, context);
    if (loaded.format !== 'module-typescript') return loaded;
    const path = url.split('?')[0];
    let source = stripped.get(path);
    if (source === undefined) {
      const text = String(loaded.source);
      const hash = createHash('sha256').update(text).digest('hex');
      source = prestripped.get(hash) ?? stripTypeScriptTypes(text, { mode: 'transform' });
      stripped.set(path, source);
    }
    return { format: 'module', source, shortCircuit: true };
  },
});
