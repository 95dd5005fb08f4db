// Module resolution of the replay's node mode (preloaded with --import): the box's node strips the
// TypeScript types itself (--experimental-transform-types); these hooks add what a TypeScript
// workspace's imports assume beyond Node's own resolution and nothing else: `./x.js` naming `./x.ts`,
// extensionless and folder imports, and the tsconfig `paths` aliases (node-plan.json). Written by hand
// (not tsx or a bundler) because it runs inside the box, where only this folder and the workspace are
// ours to place, and because it must stay this small to be worth running instead of the workspace's
// own runner. Whatever it cannot reproduce the calibration sees (the self-replay differs), and the
// task's candidates are then replayed under vitest.
import { readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
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

const pathLike = (spec) => /^(\.{1,2}\/|\/|file:)/.test(spec) || spec === '.' || spec === '..';
const RETRY = new Set(['ERR_MODULE_NOT_FOUND', 'ERR_UNSUPPORTED_DIR_IMPORT']);

registerHooks({
  resolve(specifier, context, nextResolve) {
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
  },
});
