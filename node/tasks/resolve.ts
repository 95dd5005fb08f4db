import { posix } from 'node:path';
import { type PackageJson, type ProjectInfo, tsconfigFor } from './project.ts';

/** Resolves module specifiers to workspace files. */
export interface Resolver {
  /** The workspace file `specifier` names when imported from `from`, or null (a dependency, a builtin, or missing). */
  resolve(from: string, specifier: string): string | null;
}

const TS_FOR_JS: Record<string, string[]> = {
  '.js': ['.ts', '.tsx', '.js', '.jsx'],
  '.jsx': ['.tsx', '.jsx'],
  '.mjs': ['.mts', '.mjs'],
  '.cjs': ['.cts', '.cjs'],
};
const PROBE = ['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs', '.d.ts'];
const CONDITIONS = ['types', 'import', 'node', 'module', 'default', 'require'];

/** Candidate files for a path as written (without or with an extension), in the order TypeScript tries them. */
function candidates(path: string): string[] {
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

/** A package export target for `subpath` (`.` or `./x`), following condition objects. */
function exportTarget(exportsField: unknown, subpath: string): string | null {
  const pick = (value: unknown): string | null => {
    if (typeof value === 'string') return value;
    if (Array.isArray(value)) {
      for (const v of value) {
        const t = pick(v);
        if (t) return t;
      }
      return null;
    }
    if (value && typeof value === 'object') {
      const obj = value as Record<string, unknown>;
      for (const c of CONDITIONS) if (c in obj) return pick(obj[c]);
    }
    return null;
  };
  if (exportsField === null || exportsField === undefined) return null;
  if (typeof exportsField === 'string' || Array.isArray(exportsField))
    return subpath === '.' ? pick(exportsField) : null;
  const obj = exportsField as Record<string, unknown>;
  const keys = Object.keys(obj);
  if (!keys.some((k) => k.startsWith('.'))) return subpath === '.' ? pick(obj) : null;
  if (subpath in obj) return pick(obj[subpath]);
  for (const k of keys) {
    const star = k.indexOf('*');
    if (star === -1) continue;
    const pre = k.slice(0, star);
    const post = k.slice(star + 1);
    if (subpath.startsWith(pre) && subpath.endsWith(post) && subpath.length >= pre.length + post.length) {
      const t = pick(obj[k]);
      if (t) return t.replace('*', subpath.slice(pre.length, subpath.length - post.length));
    }
  }
  return null;
}

/** Creates a resolver over the project's files: relative imports, tsconfig `paths`, workspace packages. */
export function createResolver(project: ProjectInfo): Resolver {
  const files = new Set(project.files);
  const byName = new Map(project.packages.map((p) => [p.name, p]));
  const names = [...byName.keys()].sort((a, b) => b.length - a.length);
  const cache = new Map<string, string | null>();

  const first = (paths: string[]): string | null => {
    for (const p of paths) {
      const n = posix.normalize(p);
      if (!n.startsWith('../') && files.has(n)) return n;
    }
    return null;
  };

  const fromPackage = (dir: string, json: PackageJson, sub: string): string | null => {
    const join = (p: string) => posix.join(dir, p);
    const target = exportTarget(json.exports, sub === '' ? '.' : `./${sub}`);
    const tries: string[] = [];
    const add = (p: string) => {
      tries.push(...candidates(join(p)));
      // Built output that is not on disk: map dist/x.js to src/x.ts.
      const src = p.replace(/^(\.\/)?(dist|lib|build|out)\//, 'src/').replace(/\.d\.ts$|\.js$/, '');
      if (src !== p) tries.push(...candidates(join(src)));
    };
    if (target) add(target);
    if (sub === '') {
      for (const field of [json.types, json.module, json.main]) if (field) add(field);
      tries.push(...candidates(join('src/index')), ...candidates(join('index')));
    } else {
      add(sub);
      tries.push(...candidates(join(`src/${sub}`)));
    }
    return first(tries);
  };

  const resolveUncached = (from: string, spec: string): string | null => {
    if (spec.startsWith('.') || spec.startsWith('/')) {
      if (spec.startsWith('/')) return null;
      return first(candidates(posix.join(posix.dirname(from), spec)));
    }
    if (spec.startsWith('node:')) return null;
    const cfg = tsconfigFor(project, from);
    if (cfg) {
      for (const [pattern, targets] of Object.entries(cfg.paths)) {
        const star = pattern.indexOf('*');
        let matched: string | null = null;
        if (star === -1) matched = pattern === spec ? '' : null;
        else {
          const pre = pattern.slice(0, star);
          const post = pattern.slice(star + 1);
          if (spec.startsWith(pre) && spec.endsWith(post) && spec.length >= pre.length + post.length)
            matched = spec.slice(pre.length, spec.length - post.length);
        }
        if (matched === null) continue;
        for (const t of targets) {
          const hit = first(candidates(posix.join(cfg.pathsBase, t.replace('*', matched))));
          if (hit) return hit;
        }
      }
    }
    for (const name of names) {
      if (spec === name || spec.startsWith(`${name}/`)) {
        const pkg = byName.get(name)!;
        return fromPackage(pkg.dir, pkg.json, spec.slice(name.length + 1));
      }
    }
    return null;
  };

  return {
    resolve(from, spec) {
      const key = `${posix.dirname(from)}\0${spec}`;
      let hit = cache.get(key);
      if (hit === undefined) {
        hit = resolveUncached(from, spec);
        // tsconfig paths depend on the importing file's package; the directory determines it.
        cache.set(key, hit);
      }
      return hit;
    },
  };
}
