import { afterAll, describe, expect, it } from 'vitest';
import { mine } from '../../node/tasks/mine.ts';
import {
  ensureEvalTasks,
  type Group,
  groupHash,
  holdOutByShare,
  splitGroups,
  splitWarnings,
} from '../../node/tasks/split.ts';
import { cleanupTemp, ledgerRoot, vtnode } from './helpers.ts';

afterAll(cleanupTemp);

const group = (id: string, split: 'train' | 'eval' = 'train'): Group => ({
  id,
  modules: [id],
  split,
  reason: 'test',
});

describe('holdOutByShare', () => {
  const groups = ['a', 'b', 'c', 'd'].map((m) => group(m));
  const byModule = new Map(groups.map((g) => [g.id, g]));
  const byHash = [...groups].sort((x, y) => groupHash(x.modules) - groupHash(y.modules)).map((g) => g.id);

  it('takes whole groups in hash order until the share of tasks is reached', () => {
    const tasks = new Map([
      ['a', 10],
      ['b', 10],
      ['c', 10],
      ['d', 10],
    ]);
    const out = holdOutByShare(byModule, tasks, 0.3);
    const held = [...out.values()].filter((g) => g.split === 'eval').map((g) => g.id);
    // 30% of 40 tasks = 12: the first group gives 10, the second 20 (never a group split in two).
    expect(held).toEqual(byHash.slice(0, 2).sort());
    expect(out.get(held[0]!)!.reason).toMatch(/--eval-share 0.3/);
  });

  it('counts groups already held out and never empties train', () => {
    const first = byHash[0]!;
    const named = new Map(
      [...byModule].map(([m, g]) => [m, m === first ? { ...g, split: 'eval' as const } : g]),
    );
    const tasks = new Map(groups.map((g) => [g.id, 5]));
    expect([...holdOutByShare(named, tasks, 0.2).values()].filter((g) => g.split === 'eval')).toHaveLength(1);
    const all = holdOutByShare(byModule, tasks, 0.99);
    expect([...all.values()].filter((g) => g.split === 'train')).toHaveLength(1);
    // Groups without tasks are never picked (they would hold nothing out).
    const empty = holdOutByShare(byModule, new Map([['a', 3]]), 0.5);
    expect([...empty.values()].every((g) => g.split === 'train')).toBe(true);
  });

  it('warns about an empty eval or train split, and says what to do', () => {
    expect(splitWarnings({ train: 5, eval: 0 }, 2, { evalFraction: 0.1, evalShare: null })[0]).toMatch(
      /eval split is empty.*one of the 2 group.*--eval-modules/,
    );
    expect(splitWarnings({ train: 5, eval: 0 }, 2, { evalFraction: 0, evalShare: null })[0]).toMatch(
      /eval split is empty: --eval-fraction 0/,
    );
    expect(splitWarnings({ train: 5, eval: 0 }, 1, { evalFraction: 0.1, evalShare: 0.2 })[0]).toMatch(
      /eval split is empty: --eval-share 0.2/,
    );
    expect(splitWarnings({ train: 0, eval: 5 }, 1, { evalFraction: 0.1, evalShare: null })[0]).toMatch(
      /train split is empty/,
    );
    expect(splitWarnings({ train: 4, eval: 1 }, 2, { evalFraction: 0.1, evalShare: null })).toEqual([]);
    expect(splitWarnings({ train: 0, eval: 0 }, 0, { evalFraction: 0.1, evalShare: null })).toEqual([]);
  });
});

describe('ensureEvalTasks (a fraction-of-groups split on a small repository)', () => {
  const ids = Array.from({ length: 40 }, (_, i) => `m${i}`);
  const evalIds = (m: Map<string, Group>) =>
    [...new Set([...m.values()].filter((g) => g.split === 'eval').map((g) => g.id))].sort();
  const even = (names: string[], n = 3) => new Map(names.map((id) => [id, n]));

  it('holds out a group when none hashes below the fraction, for every small repository', () => {
    // Every window of 2-8 modules from a fixed list: many of them have no group below 0.1.
    let fellBack = 0;
    for (let size = 2; size <= 8; size++)
      for (let start = 0; start + size <= ids.length; start++) {
        const names = ids.slice(start, start + size);
        const split = splitGroups(names, [], 0.1, new Set());
        const out = ensureEvalTasks(split, even(names), 0.1);
        const held = evalIds(out);
        expect(held.length, names.join(',')).toBeGreaterThan(0);
        expect(held.length, names.join(',')).toBeLessThan(names.length);
        if (evalIds(split).length === 0) {
          fellBack++;
          // The group held out is the first in hash order; with equal groups 0.1 of the tasks is one group.
          const first = [...names].sort((a, b) => groupHash([a]) - groupHash([b]))[0]!;
          expect(held).toEqual([first]);
          expect(out.get(first)!.reason).toMatch(/no group with tasks hashes below --eval-fraction 0.1/);
        } else expect(out).toEqual(split);
      }
    expect(fellBack).toBeGreaterThan(50);
  });

  it('treats eval groups without tasks as no eval split', () => {
    const names = ids.slice(0, 12);
    const split = splitGroups(names, [], 0.1, new Set());
    const below = evalIds(split);
    expect(below.length).toBeGreaterThan(0);
    // Tasks only in train groups: the eval groups hold nothing out.
    const tasks = new Map(names.filter((n) => !below.includes(n)).map((n) => [n, 2]));
    const held = evalIds(ensureEvalTasks(split, tasks, 0.1)).filter((id) => tasks.has(id));
    expect(held.length).toBe(1);
  });

  it('leaves one group of tasks in train, and a fraction of 0 holds out nothing', () => {
    const names = ids.slice(0, 5);
    const split = splitGroups(names, [], 0, new Set());
    expect(evalIds(ensureEvalTasks(split, even(names), 0))).toEqual([]);
    const one = new Map([[names[0]!, 7]]);
    const withOne = ensureEvalTasks(splitGroups(names, [], 0.000001, new Set()), one, 0.1);
    expect(withOne.get(names[0]!)!.split).toBe('train');
  });

  it('does not depend on the order of the modules', () => {
    const names = ids.slice(3, 9);
    const a = ensureEvalTasks(splitGroups(names, [], 0.1, new Set()), even(names), 0.1);
    const b = ensureEvalTasks(splitGroups([...names].reverse(), [], 0.1, new Set()), even(names), 0.1);
    expect(evalIds(a)).toEqual(evalIds(b));
  });
});

describe('mine with an eval share', () => {
  it('holds out tasks of the example corpus by default (no group hashes below 0.1), and --eval-share too', async () => {
    const plain = await mine({ root: ledgerRoot });
    const evalGroups = plain.summary.groups.filter((g) => g.split === 'eval');
    expect(plain.summary.bySplit.eval).toBeGreaterThan(0);
    expect(plain.summary.bySplit.train).toBeGreaterThan(plain.summary.bySplit.eval);
    expect(evalGroups.map((g) => g.reason).join('\n')).toMatch(/no group with tasks hashes below/);
    expect(plain.summary.warnings).toEqual([]);
    const shared = await mine({ root: ledgerRoot, evalShare: 0.1 });
    const { train, eval: held } = shared.summary.bySplit;
    expect(held / (train + held)).toBeGreaterThanOrEqual(0.1);
    expect(train).toBeGreaterThan(0);
    expect(shared.summary.warnings).toEqual([]);
    // Whole groups: every task of a group has that group's split.
    for (const g of shared.summary.groups)
      for (const t of shared.tasks.filter((x) => x.group === g.id)) expect(t.split).toBe(g.split);
    await expect(mine({ root: ledgerRoot, evalShare: 1 })).rejects.toThrow(/eval share/);
  });

  it('prints the warning on stderr and refuses --eval-share with --eval-fraction', async () => {
    const both = await vtnode([
      'mine',
      '--eval-share',
      '0.1',
      '--eval-fraction',
      '0.2',
      '--out',
      '/dev/null',
    ]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/exclusive/);
    const bad = await vtnode(['mine', '--eval-share', '0', '--json']);
    expect(bad.code).toBe(2);
    // --json carries the refusal on stdout.
    expect(JSON.parse(bad.stdout)).toEqual({
      error: expect.stringMatching(/--eval-share must be/),
      exitCode: 2,
    });
  });
});
