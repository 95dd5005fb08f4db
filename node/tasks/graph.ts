import { getOrInsert } from './multimap.ts';
import type { ImportRef, ParsedFile } from './parse.ts';
import type { Resolver } from './resolve.ts';

/** An import of one workspace file by another, resolved. */
export interface Edge {
  /** Importing file. */
  from: string;
  /** Imported workspace file. */
  to: string;
  ref: ImportRef;
}

/** The resolved import graph of the workspace's code files. */
export interface ImportGraph {
  readonly files: ReadonlyMap<string, ParsedFile>;
  /** Edges out of a file, in source order. */
  out(file: string): readonly Edge[];
  /** Edges into a file. */
  into(file: string): readonly Edge[];
  /**
   * Where `name`, imported from `file`, is declared: pairs [declaring file, its local name], following
   * `export { a as b } from` and `export * from`. `*` as local name means the whole file (a namespace).
   */
  declarers(file: string, name: string): [string, string][];
  /** Files whose code runs or whose names are used when `names` are imported from `file`. */
  touched(file: string, names: readonly string[]): Set<string>;
}

/** Resolves every import of `files`; imports of dependencies and builtins are dropped. */
export function buildGraph(files: ReadonlyMap<string, ParsedFile>, resolver: Resolver): ImportGraph {
  const outMap = new Map<string, Edge[]>();
  const inMap = new Map<string, Edge[]>();
  for (const [path, parsed] of files) {
    const edges: Edge[] = [];
    for (const ref of parsed.imports) {
      const to = resolver.resolve(path, ref.specifier);
      if (to === null || to === path || !files.has(to)) continue;
      const edge = { from: path, to, ref };
      edges.push(edge);
      const list = getOrInsert(inMap, to, () => []);
      list.push(edge);
    }
    outMap.set(path, edges);
  }

  const declCache = new Map<string, [string, string][]>();
  const declarers = (file: string, name: string, seen = new Set<string>()): [string, string][] => {
    const key = `${file}\0${name}`;
    const cached = declCache.get(key);
    if (cached) return cached;
    if (seen.has(key)) return [];
    seen.add(key);
    const parsed = files.get(file);
    const found: [string, string][] = [];
    if (parsed?.exports.includes(name)) found.push([file, name]);
    else {
      for (const edge of outMap.get(file) ?? []) {
        for (const [as, orig] of edge.ref.reexports ?? []) {
          if (as === name && orig === '*') found.push([edge.to, '*']);
          else if (as === name) found.push(...declarers(edge.to, orig, seen));
          else if (as === '*' && name !== 'default') found.push(...declarers(edge.to, name, seen));
        }
      }
    }
    const unique = [...new Map(found.map((p) => [`${p[0]}\0${p[1]}`, p])).values()];
    declCache.set(key, unique);
    return unique;
  };

  const closure = (file: string, acc: Set<string>) => {
    if (acc.has(file)) return;
    acc.add(file);
    for (const edge of outMap.get(file) ?? []) if (edge.ref.reexports) closure(edge.to, acc);
  };

  return {
    files,
    out: (file) => outMap.get(file) ?? [],
    into: (file) => inMap.get(file) ?? [],
    declarers: (file, name) => declarers(file, name),
    touched(file, names) {
      const acc = new Set<string>([file]);
      for (const name of names) {
        if (name === '*') closure(file, acc);
        else
          for (const [decl, local] of declarers(file, name)) {
            if (local === '*') closure(decl, acc);
            else acc.add(decl);
          }
      }
      return acc;
    },
  };
}
