import type { ImportGraph } from './graph.ts';
import { getOrInsert } from './multimap.ts';

/**
 * For every file, the names other files import from it, by their name in that file: direct imports,
 * and imports through barrels that resolve to it. A namespace import (or `require`) asks for all exports.
 */
export function mustDeclareMap(graph: ImportGraph): Map<string, Set<string>> {
  const must = new Map<string, Set<string>>();
  const add = (file: string, name: string) => {
    const set = getOrInsert(must, file, () => new Set());
    set.add(name);
  };
  const all = (file: string) => {
    for (const n of graph.files.get(file)?.exports ?? []) add(file, n);
  };
  for (const file of graph.files.keys()) {
    for (const edge of graph.out(file)) {
      for (const n of edge.ref.names) {
        if (n === '*') {
          for (const f of graph.touched(edge.to, ['*'])) all(f);
          continue;
        }
        // The imported file must export the name, whether it declares it or re-exports it.
        add(edge.to, n);
        for (const [decl, local] of graph.declarers(edge.to, n)) {
          if (decl === edge.to) continue;
          if (local === '*') all(decl);
          else add(decl, local);
        }
      }
    }
  }
  return must;
}

/** Names sorted for a prompt: `default` first, then by code point. */
export function sortNames(names: Iterable<string>): string[] {
  return [...names].sort((a, b) => (a === 'default' ? -1 : b === 'default' ? 1 : a < b ? -1 : a > b ? 1 : 0));
}
