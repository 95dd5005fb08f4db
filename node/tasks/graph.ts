import { getOrInsert } from './multimap.ts';
import type { ImportedName, ImportRef, ParsedFile } from './parse.ts';
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
  /**
   * Files whose code runs or whose names are used when `names` are imported from `file` (`*`: all of
   * it): `file` itself, the files declaring the names (through `export ... from` and `export *` chains),
   * every file a namespace reaches, and the files a facade's wrappers and top-level code call into.
   */
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

  const facade = (file: string): boolean => files.get(file)?.facade ?? false;
  const edgeFor = (file: string, specifier: string) =>
    (outMap.get(file) ?? []).find((e) => e.ref.specifier === specifier);

  /** Walks what importing names runs: declaring files, whole files for `*`, wrappers' callees. */
  const touched = (file: string, names: readonly string[]): Set<string> => {
    const acc = new Set<string>();
    const wholeSeen = new Set<string>();
    const declSeen = new Set<string>();
    const enter = (f: string) => {
      if (acc.has(f)) return;
      acc.add(f);
      if (facade(f)) for (const dep of files.get(f)!.effects) takeImported(f, dep);
    };
    const takeImported = (f: string, dep: ImportedName) => {
      const edge = edgeFor(f, dep.specifier);
      if (!edge) return;
      if (dep.name === '*') takeAll(edge.to);
      else takeName(edge.to, dep.name);
    };
    const takeDecl = (f: string, exported: string) => {
      const key = `${f}\0${exported}`;
      if (declSeen.has(key)) return;
      declSeen.add(key);
      enter(f);
      if (!facade(f)) return;
      const parsed = files.get(f)!;
      for (const dep of parsed.uses[parsed.localExports[exported] ?? exported] ?? []) takeImported(f, dep);
    };
    const takeName = (f: string, name: string) => {
      enter(f);
      for (const [decl, local] of declarers(f, name)) {
        if (local === '*') takeAll(decl);
        else takeDecl(decl, local);
      }
    };
    const takeAll = (f: string) => {
      if (wholeSeen.has(f)) return;
      wholeSeen.add(f);
      enter(f);
      for (const name of files.get(f)?.exports ?? []) takeDecl(f, name);
      for (const edge of outMap.get(f) ?? [])
        for (const [, orig] of edge.ref.reexports ?? []) {
          if (orig === '*') takeAll(edge.to);
          else takeName(edge.to, orig);
        }
    };
    enter(file);
    for (const name of names) {
      if (name === '*') takeAll(file);
      else takeName(file, name);
    }
    return acc;
  };

  return {
    files,
    out: (file) => outMap.get(file) ?? [],
    into: (file) => inMap.get(file) ?? [],
    declarers: (file, name) => declarers(file, name),
    touched,
  };
}
