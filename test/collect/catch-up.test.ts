import { describe, expect, it } from 'vitest';
import { planCatchUp, summaryKey, worthPulling } from '../../node/collector/catch-up.ts';
import type { OriginSummary } from '../../protocol/fetch.ts';

// The pure part of anti-entropy over /vtnode/log/2 (node/collector/catch-up.ts).

const s = (origin: string, highWater: number, maxSeq = highWater, count = maxSeq): OriginSummary => ({
  origin,
  highWater,
  maxSeq,
  count,
});

describe('worthPulling', () => {
  it('only when the peer holds a seq above our contiguous high-water mark', () => {
    expect(worthPulling(0, s('o', 5))).toBe(true);
    expect(worthPulling(5, s('o', 5))).toBe(false);
    expect(worthPulling(9, s('o', 5))).toBe(false);
    // A gap at the peer: it holds 1..3 and 7..9; we hold 1..5.
    expect(worthPulling(5, s('o', 3, 9, 6))).toBe(true);
    expect(worthPulling(0, s('o', 0, 0, 0))).toBe(false);
  });

  it('not again for a state of the peer already pulled (a gap nobody can fill is not re-read every round)', () => {
    const remote = s('o', 3, 9, 6);
    expect(worthPulling(3, remote, summaryKey(remote))).toBe(false);
    expect(worthPulling(3, s('o', 3, 10, 7), summaryKey(remote))).toBe(true);
  });
});

describe('planCatchUp', () => {
  it('asks the origin itself first, then the holders that hold most, then by peer id; skips those with nothing new', () => {
    const indices = new Map<string, OriginSummary[]>([
      ['worker-a', [s('worker-a', 10)]],
      ['collector-1', [s('worker-a', 10), s('worker-dead', 40), s('worker-b', 3)]],
      ['collector-2', [s('worker-a', 12), s('worker-dead', 40, 45, 42)]],
      ['collector-0', [s('worker-dead', 40)]],
    ]);
    const local = new Map([['worker-b', 3]]);
    const plan = planCatchUp(indices, (o) => local.get(o) ?? 0);
    expect([...plan.keys()]).toEqual(['worker-a', 'worker-dead']);
    expect(plan.get('worker-a')!.map((x) => x.peer)).toEqual(['worker-a', 'collector-2', 'collector-1']);
    expect(plan.get('worker-dead')!.map((x) => x.peer)).toEqual([
      'collector-2',
      'collector-0',
      'collector-1',
    ]);
  });

  it('leaves out what was already pulled from a peer in the same state', () => {
    const indices = new Map([['c', [s('o', 3, 9, 6)]]]);
    expect(planCatchUp(indices, () => 3).get('o')).toHaveLength(1);
    expect(planCatchUp(indices, () => 3, new Map([['c\no', '3/9/6']])).size).toBe(0);
  });
});
