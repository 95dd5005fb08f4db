import { describe, expect, it } from 'vitest';
import { type DemoTask, pickDemoTasks } from '../../cli/demo-plan.ts';

const t = (id: string, kind: 'file' | 'tests', split: 'train' | 'eval', module = id): DemoTask => ({
  id,
  kind,
  split,
  module,
});

describe('pickDemoTasks', () => {
  const corpus = [
    t('a1', 'file', 'train', 'a'),
    t('a2', 'tests', 'train', 'a'),
    t('a3', 'file', 'train', 'a'),
    t('b1', 'file', 'train', 'b'),
    t('b2', 'tests', 'train', 'b'),
    t('c1', 'file', 'train', 'c'),
    t('e1', 'tests', 'eval', 'e'),
    t('e2', 'file', 'eval', 'e'),
    t('e3', 'file', 'eval', 'e'),
  ];

  it('takes eval tasks first, then alternates kinds, one task per module before a second', () => {
    expect(pickDemoTasks(corpus, 4).map((x) => x.id)).toEqual(['a1', 'a2', 'e1', 'e2']);
    expect(pickDemoTasks(corpus, 6).map((x) => x.id)).toEqual(['a1', 'a2', 'b1', 'e1', 'e2', 'e3']);
  });

  it('keeps the input order and does not depend on it', () => {
    const shuffled = [...corpus].reverse();
    const picked = pickDemoTasks(shuffled, 5);
    expect(picked.map((x) => x.id)).toEqual(shuffled.filter((x) => picked.includes(x)).map((x) => x.id));
    expect(new Set(picked.map((x) => x.id))).toEqual(new Set(pickDemoTasks(corpus, 5).map((x) => x.id)));
  });

  it('takes everything for 0 or more than there are, and nothing from nothing', () => {
    expect(pickDemoTasks(corpus, 0)).toEqual(corpus);
    expect(pickDemoTasks(corpus, 99)).toEqual(corpus);
    expect(pickDemoTasks([], 3)).toEqual([]);
  });

  it('fills from the other buckets when one runs dry (no eval split: train only)', () => {
    const train = corpus.filter((x) => x.split === 'train');
    expect(pickDemoTasks(train, 5).map((x) => x.id)).toEqual(['a1', 'a2', 'b1', 'b2', 'c1']);
    expect(pickDemoTasks(train, 5)).toHaveLength(5);
  });

  it('includes an eval task whenever eval has one, for any n >= 1', () => {
    const oneEval = [...corpus.filter((x) => x.split === 'train'), t('z9', 'file', 'eval', 'z')];
    for (let n = 1; n <= oneEval.length; n++)
      expect(pickDemoTasks(oneEval, n).some((x) => x.split === 'eval')).toBe(true);
  });
});
