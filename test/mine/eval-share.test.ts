import { afterAll, describe, expect, it } from 'vitest';
import { mine } from '../../node/tasks/mine.ts';
import { type Group, groupHash, holdOutByShare, splitWarnings } from '../../node/tasks/split.ts';
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
      /eval split is empty.*--eval-share/,
    );
    expect(splitWarnings({ train: 0, eval: 5 }, 1, { evalFraction: 0.1, evalShare: null })[0]).toMatch(
      /train split is empty/,
    );
    expect(splitWarnings({ train: 4, eval: 1 }, 2, { evalFraction: 0.1, evalShare: null })).toEqual([]);
    expect(splitWarnings({ train: 0, eval: 0 }, 0, { evalFraction: 0.1, evalShare: null })).toEqual([]);
  });
});

describe('mine with an eval share', () => {
  it('warns that the example corpus has an empty eval split, and --eval-share fills it', async () => {
    const plain = await mine({ root: ledgerRoot });
    expect(plain.summary.bySplit.eval).toBe(0);
    expect(plain.summary.warnings.join('\n')).toMatch(/eval split is empty/);
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
