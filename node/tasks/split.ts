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

/**
 * Holds out whole groups for eval until they hold at least `share` of the tasks: groups are taken in
 * the order of their stable hash (so the choice does not depend on file order), groups already held
 * out (`--eval-modules`) count toward the share, and a group is never split. At least one group with
 * tasks stays in train. Returns the groups by module, with split and reason updated.
 */
export function holdOutByShare(
  byModule: ReadonlyMap<string, Group>,
  tasksOf: ReadonlyMap<string, number>,
  share: number,
  why = `--eval-share ${share}`,
): Map<string, Group> {
  const groups = [...new Map([...byModule.values()].map((g) => [g.id, g])).values()];
  const total = groups.reduce((n, g) => n + (tasksOf.get(g.id) ?? 0), 0);
  let held = groups.filter((g) => g.split === 'eval').reduce((n, g) => n + (tasksOf.get(g.id) ?? 0), 0);
  const candidates = groups
    .filter((g) => g.split === 'train' && (tasksOf.get(g.id) ?? 0) > 0)
    .map((g) => ({ g, h: groupHash(g.modules) }))
    .sort((a, b) => a.h - b.h || (a.g.id < b.g.id ? -1 : 1));
  const updated = new Map<string, Group>();
  for (const [i, { g, h }] of candidates.entries()) {
    if (held >= share * total || i === candidates.length - 1) break;
    held += tasksOf.get(g.id) ?? 0;
    updated.set(g.id, {
      ...g,
      split: 'eval',
      reason: `${why}: held out in hash order (hash ${h.toFixed(4)})`,
    });
  }
  return new Map([...byModule].map(([m, g]) => [m, updated.get(g.id) ?? g]));
}

/**
 * Guarantees a fraction-of-groups split an eval split with tasks in it. On a small repository no group
 * may hash below the fraction (6 groups at 0.1: 53% of repositories), or only groups without tasks do;
 * then whole groups are held out in hash order until they hold `evalFraction` of the tasks (see
 * holdOutByShare: at least one group, never all of them). A fraction of 0 asks for no eval split.
 */
export function ensureEvalTasks(
  byModule: ReadonlyMap<string, Group>,
  tasksOf: ReadonlyMap<string, number>,
  evalFraction: number,
): Map<string, Group> {
  const groups = new Map([...byModule.values()].map((g) => [g.id, g]));
  const held = [...groups.values()].some((g) => g.split === 'eval' && (tasksOf.get(g.id) ?? 0) > 0);
  if (evalFraction === 0 || held) return new Map(byModule);
  return holdOutByShare(
    byModule,
    tasksOf,
    evalFraction,
    `no group with tasks hashes below --eval-fraction ${evalFraction}, so groups are held out by task share`,
  );
}

/** Warnings about a split that cannot measure anything: an empty eval or an empty train split. */
export function splitWarnings(
  bySplit: Record<'train' | 'eval', number>,
  groups: number,
  how: { evalFraction: number; evalShare: number | null },
): string[] {
  if (bySplit.train + bySplit.eval === 0) return [];
  if (bySplit.eval === 0)
    return [
      how.evalShare !== null
        ? `the eval split is empty: --eval-share ${how.evalShare} cannot hold out a group without emptying train (${groups} group(s)); name modules with --eval-modules`
        : how.evalFraction === 0
          ? 'the eval split is empty: --eval-fraction 0 holds out nothing; name modules with --eval-modules'
          : `the eval split is empty: the tasks are in one of the ${groups} group(s), which must stay in train; name modules with --eval-modules`,
    ];
  if (bySplit.train === 0) return [`the train split is empty: all ${groups} group(s) are held out for eval`];
  return [];
}
