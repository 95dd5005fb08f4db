import { sha256Hex } from '../../protocol/canonical.ts';
import { getOrInsert } from './multimap.ts';

/** Disjoint sets over names, with path halving. */
export class UnionFind {
  readonly #parent = new Map<string, string>();

  add(x: string): void {
    if (!this.#parent.has(x)) this.#parent.set(x, x);
  }

  find(x: string): string {
    this.add(x);
    let p = this.#parent.get(x)!;
    while (p !== x) {
      const gp = this.#parent.get(p)!;
      this.#parent.set(x, gp);
      x = p;
      p = this.#parent.get(x)!;
    }
    return x;
  }

  union(a: string, b: string): void {
    const ra = this.find(a);
    const rb = this.find(b);
    // The smaller name becomes the root, so roots do not depend on insertion order.
    if (ra < rb) this.#parent.set(rb, ra);
    else if (rb < ra) this.#parent.set(ra, rb);
  }

  /** Every set, each sorted, ordered by first member. */
  groups(): string[][] {
    const by = new Map<string, string[]>();
    for (const x of this.#parent.keys()) {
      const r = this.find(x);
      const list = getOrInsert(by, r, () => []);
      list.push(x);
    }
    return [...by.values()].map((g) => g.sort()).sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
  }
}

/** A source-sharing group: modules joined because one's tests import another's sources. */
export interface Group {
  /** Readable, unique id: the first module by name, plus how many others (`journal+3`). */
  id: string;
  /** Member modules, sorted. */
  modules: string[];
  split: 'train' | 'eval';
  /** Why it has that split. */
  reason: string;
}

/** Position of a group in [0, 1): a stable hash of its sorted member list. */
export function groupHash(modules: readonly string[]): number {
  const hex = sha256Hex([...modules].sort().join('\n')).slice(0, 13);
  return Number.parseInt(hex, 16) / 2 ** 52;
}

/**
 * Joins modules by `links` and gives each group its split: eval when it holds a module named in
 * `evalModules`, or when its hash falls below `evalFraction`; train otherwise.
 */
export function splitGroups(
  modules: Iterable<string>,
  links: Iterable<[string, string]>,
  evalFraction: number,
  evalModules: ReadonlySet<string>,
): Map<string, Group> {
  const uf = new UnionFind();
  for (const m of modules) uf.add(m);
  for (const [a, b] of links) uf.union(a, b);
  const byModule = new Map<string, Group>();
  for (const members of uf.groups()) {
    const named = members.filter((m) => evalModules.has(m));
    const h = groupHash(members);
    const group: Group = {
      id: members.length === 1 ? members[0]! : `${members[0]}+${members.length - 1}`,
      modules: members,
      split: named.length > 0 || h < evalFraction ? 'eval' : 'train',
      reason:
        named.length > 0
          ? `--eval-modules ${named.join(',')}`
          : `hash ${h.toFixed(4)} ${h < evalFraction ? '<' : '>='} --eval-fraction ${evalFraction}`,
    };
    for (const m of members) byModule.set(m, group);
  }
  return byModule;
}
