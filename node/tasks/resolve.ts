import { existsSync } from 'node:fs';
import { join, posix, sep } from 'node:path';
import { type PackageJson, type ProjectInfo, packageOf, type TsConfigInfo, tsconfigFor } from './project.ts';

/** Resolves module specifiers to workspace files. */
export interface Resolver {
  /** The workspace file `specifier` names when imported from `from`, or null (a dependency, a builtin, built output, or missing). */
  resolve(from: string, specifier: string): string | null;
}

const TS_FOR_JS: Record<string, string[]> = {
  '.js': ['.ts', '.tsx', '.js', '.jsx'],
  '.jsx': ['.tsx', '.jsx'],
  '.mjs': ['.mts', '.mjs'],
  '.cjs': ['.cts', '.cjs'],
};
const PROBE = ['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs', '.d.ts'];
/** The conditions TypeScript and Node match in `exports`/`imports` (tsconfig `customConditions` add to them). */
const STANDARD_CONDITIONS = ['types', 'import', 'require', 'node', 'module', 'default'];
/** Folders build tools write to; `dist/esm/x.js` maps back to `src/x.ts` when the build is not on disk. */
const BUILD_DIR = /^(dist|lib|build|out)(\/(esm|cjs|mjs|es|module|commonjs|types|node))?\//;
const DECLARATION = /\.d\.[cm]?ts$/;
/** A package entry that runs built output present on disk. */
const BUILT = Symbol('built');

/** Candidate files for a path as written (without or with an extension), in the order TypeScript tries them. */
export function candidates(path: string): string[] {
  const ext = posix.extname(path);
  const out: string[] = [];
  const mapped = TS_FOR_JS[ext];
  if (mapped) for (const e of mapped) out.push(path.slice(0, -ext.length) + e);
  out.push(path);
  if (!mapped) {
    for (const e of PROBE) out.push(path + e);
    for (const e of PROBE) out.push(`${path}/index${e}`);
  }
  return out;
}

/** The capture of `*` when `key` (`./x/*.js`, or an exact key) matches `subpath`, else null. */
export function matchPattern(key: string, subpath: string): string | null {
  const star = key.indexOf('*');
  if (star === -1) return key === subpath ? '' : null;
  const pre = key.slice(0, star);
  const post = key.slice(star + 1);
  if (subpath.startsWith(pre) && subpath.endsWith(post) && subpath.length >= pre.length + post.length)
    return subpath.slice(pre.length, subpath.length - post.length);
  return null;
}

/** A target of a package map, and whether it was chosen through the `types` condition (never executed). */
export interface MapTarget {
  path: string;
  typesOnly: boolean;
}

/**
 * Every target a condition value leads to, in the order of its keys (Node picks the first match; all
 * are kept so a built target can be mapped back to its source). `null` blocks the subpath.
 */
export function conditionalTargets(
  value: unknown,
  conditions: ReadonlySet<string>,
  typesOnly = false,
): MapTarget[] {
  if (typeof value === 'string') return [{ path: value, typesOnly: typesOnly || DECLARATION.test(value) }];
  if (Array.isArray(value)) return value.flatMap((v) => conditionalTargets(v, conditions, typesOnly));
  if (!value || typeof value !== 'object') return [];
  const out: MapTarget[] = [];
  for (const [key, v] of Object.entries(value as Record<string, unknown>))
    if (conditions.has(key)) out.push(...conditionalTargets(v, conditions, typesOnly || key === 'types'));
  return out;
}

/**
 * Targets of `subpath` (`.`, `./x`, or `#x` for `imports`) in a package map: an exact key first, else
 * the pattern with the longest prefix, as Node orders them.
 */
export function mapTargets(map: unknown, subpath: string, conditions: ReadonlySet<string>): MapTarget[] {
  if (map === null || map === undefined) return [];
  if (typeof map === 'string' || Array.isArray(map))
    return subpath === '.' ? conditionalTargets(map, conditions) : [];
  const obj = map as Record<string, unknown>;
  const keys = Object.keys(obj);
  // Sugar: `"exports": { "import": ..., "require": ... }` is the `.` entry.
  if (!keys.some((k) => k.startsWith('.') || k.startsWith('#')))
    return subpath === '.' ? conditionalTargets(obj, conditions) : [];
  if (subpath in obj && !subpath.includes('*')) return conditionalTargets(obj[subpath], conditions);
  const patterns = keys
    .filter((k) => k.includes('*') && matchPattern(k, subpath) !== null)
    .sort((a, b) => b.indexOf('*') - a.indexOf('*') || b.length - a.length);
  const best = patterns[0];
  if (best === undefined) return [];
  const capture = matchPattern(best, subpath)!;
  return conditionalTargets(obj[best], conditions).map((t) => ({
    ...t,
    path: t.path.replaceAll('*', capture),
  }));
}

/** Where a built path's source would be: through the tsconfig's outDir -> rootDir, else `dist/` -> `src/`. */
function sourceOfBuilt(path: string, outToRoot: [string, string] | null): string[] {
  const stripped = path.replace(/\.d\.[cm]?ts$|\.[cm]?js$/, '');
  const out: string[] = [];
  if (outToRoot) {
    const [outDir, rootDir] = outToRoot;
    if (stripped.startsWith(`${outDir}/`)) out.push(posix.join(rootDir, stripped.slice(outDir.length + 1)));
  }
  const heuristic = stripped.replace(BUILD_DIR, 'src/');
  if (heuristic !== stripped) out.push(heuristic);
  if (stripped !== path) out.push(stripped);
  return out;
}

/** One package a specifier can name: the root package or a workspace member. */
interface NamedPackage {
  dir: string;
  json: PackageJson;
}

/**
 * Creates a resolver over the project's files, as TypeScript and Node see them: relative imports
 * (`./x.js` finds `x.ts`), tsconfig `paths` and `baseUrl` (inherited through `extends`), package
 * `exports` (conditions in key order) and `imports` (`#internal`), workspace packages by name, and
 * the package's own name (self-imports). A package entry that points at built output which EXISTS on
 * disk resolves to null: the test would run the build, not the source. Built output that is not on disk
 * maps back to its source (tsconfig outDir -> rootDir, or `dist/` -> `src/`).
 */
export function createResolver(project: ProjectInfo): Resolver {
  const files = new Set(project.files);
  const byName = new Map<string, NamedPackage>(project.packages.map((p) => [p.name, p]));
  if (project.rootPackage?.name && !byName.has(project.rootPackage.name))
    byName.set(project.rootPackage.name, { dir: '', json: project.rootPackage });
  const names = [...byName.keys()].sort((a, b) => b.length - a.length);
  const cache = new Map<string, string | null>();
  const onDisk = (rel: string) => existsSync(join(project.root, rel));

  // Paths may climb out and back in (`../../packages/x/src/a` from a member's inherited `paths`).
  const rootPosix = project.root.split(sep).join('/');
  const first = (paths: string[]): string | null => {
    for (const p of paths) {
      const n = p.startsWith('../')
        ? posix.relative(rootPosix, posix.resolve(rootPosix, p))
        : posix.normalize(p);
      if (!n.startsWith('../') && files.has(n)) return n;
    }
    return null;
  };

  const conditionsFor = (cfg: TsConfigInfo | null) =>
    new Set([...STANDARD_CONDITIONS, ...(cfg?.conditions ?? [])]);

  /** The workspace file a package map or field target is; BUILT when it runs built code; null when missing. */
  const fromTargets = (
    dir: string,
    targets: MapTarget[],
    cfg: TsConfigInfo | null,
  ): string | typeof BUILT | null => {
    const inPkg = (p: string) => posix.join(dir, p);
    for (const t of targets) {
      const hit = first(candidates(inPkg(t.path)));
      if (hit) return hit;
    }
    // Built output on disk is what Node runs: not a workspace source.
    if (targets.some((t) => !t.typesOnly && onDisk(inPkg(t.path)))) return BUILT;
    for (const t of targets) {
      const inPackage = posix.normalize(t.path).replace(/^\.\//, '');
      const outToRoot = cfg?.outToRoot
        ? (cfg.outToRoot.map((p) => posix.relative(dir, p)) as [string, string])
        : null;
      for (const src of sourceOfBuilt(inPackage, outToRoot)) {
        const hit = first(candidates(inPkg(src)));
        if (hit) return hit;
      }
    }
    return null;
  };

  const fromPackage = (pkg: NamedPackage, sub: string): string | typeof BUILT | null => {
    const cfg = tsconfigFor(project, pkg.dir === '' ? 'package.json' : `${pkg.dir}/package.json`);
    const conditions = conditionsFor(cfg);
    const subpath = sub === '' ? '.' : `./${sub}`;
    if (pkg.json.exports !== undefined && pkg.json.exports !== null)
      return fromTargets(pkg.dir, mapTargets(pkg.json.exports, subpath, conditions), cfg);
    if (sub !== '')
      return fromTargets(
        pkg.dir,
        [
          { path: sub, typesOnly: false },
          { path: `src/${sub}`, typesOnly: false },
        ],
        cfg,
      );
    const fields: MapTarget[] = [];
    for (const [field, typesOnly] of [
      [pkg.json.module, false],
      [pkg.json.main, false],
      [pkg.json.types, true],
    ] as const)
      if (field) fields.push({ path: field, typesOnly });
    const hit = fromTargets(pkg.dir, fields, cfg);
    if (hit === BUILT) return BUILT;
    return (
      hit ??
      first([...candidates(posix.join(pkg.dir, 'src/index')), ...candidates(posix.join(pkg.dir, 'index'))])
    );
  };

  const fromPaths = (cfg: TsConfigInfo, spec: string): string | null => {
    for (const [pattern, targets] of Object.entries(cfg.paths)) {
      const matched = matchPattern(pattern, spec);
      if (matched === null) continue;
      for (const t of targets) {
        const hit = first(candidates(posix.join(cfg.pathsBase, t.replace('*', matched))));
        if (hit) return hit;
      }
    }
    return null;
  };

  const resolveUncached = (from: string, spec: string): string | null => {
    if (spec.startsWith('/')) return null;
    if (spec.startsWith('.')) return first(candidates(posix.join(posix.dirname(from), spec)));
    if (spec.startsWith('node:')) return null;
    const cfg = tsconfigFor(project, from);
    if (spec.startsWith('#')) {
      const own = packageOf(project, from);
      const pkg: NamedPackage | null =
        own ?? (project.rootPackage ? { dir: '', json: project.rootPackage } : null);
      if (!pkg) return null;
      const targets = mapTargets(pkg.json.imports, spec, conditionsFor(cfg));
      const local = targets.filter((t) => t.path.startsWith('./'));
      // A target naming a package (`"#dep": "some-pkg"`) resolves like that bare specifier.
      const bare = targets.find((t) => !t.path.startsWith('./'));
      const hit = fromTargets(pkg.dir, local, cfg);
      if (hit === BUILT) return null;
      return hit ?? (bare ? resolveUncached(from, bare.path) : null);
    }
    const viaPaths = cfg ? fromPaths(cfg, spec) : null;
    if (viaPaths) return viaPaths;
    if (cfg?.baseUrl !== null && cfg?.baseUrl !== undefined) {
      const hit = first(candidates(posix.join(cfg.baseUrl, spec)));
      if (hit) return hit;
    }
    for (const name of names) {
      if (spec === name || spec.startsWith(`${name}/`)) {
        const hit = fromPackage(byName.get(name)!, spec.slice(name.length + 1));
        return hit === BUILT ? null : hit;
      }
    }
    return null;
  };

  return {
    resolve(from, spec) {
      // tsconfig paths and `#imports` depend on the importing file's package; the directory determines it.
      const key = `${posix.dirname(from)}\0${spec}`;
      let hit = cache.get(key);
      if (hit === undefined) {
        hit = resolveUncached(from, spec);
        cache.set(key, hit);
      }
      return hit;
    },
  };
}
