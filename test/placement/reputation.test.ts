import { describe, expect, it } from 'vitest';
import { createReputation } from '../../placement/reputation.ts';

const T0 = 1_700_000_000_000;

describe('reputation', () => {
  it('starts clean for unknown nodes', () => {
    const rep = createReputation();
    expect(rep.standing('x', T0)).toEqual({
      penalty: 0,
      consecutiveFailures: 0,
      coolDownUntil: 0,
      weightFactor: 1,
    });
    expect(rep.coolingDown('x', T0)).toBe(false);
    expect(rep.weightFactor('x', T0)).toBe(1);
    expect(rep.success('x', T0).penalty).toBe(0);
    expect(rep.size).toBe(0);
  });

  it('adds a penalty per failure that halves every half-life', () => {
    const rep = createReputation({ halfLifeMs: 1000, failurePenalty: 2 });
    expect(rep.failure('a', T0).penalty).toBe(2);
    expect(rep.standing('a', T0 + 1000).penalty).toBeCloseTo(1, 10);
    expect(rep.standing('a', T0 + 2000).penalty).toBeCloseTo(0.5, 10);
    // A second failure one half-life later adds to the decayed value.
    expect(rep.failure('a', T0 + 1000).penalty).toBeCloseTo(3, 10);
    expect(rep.weightFactor('a', T0 + 1000)).toBeCloseTo(1 / 4, 10);
  });

  it('lets a success multiply the penalty down and end the failure streak', () => {
    const rep = createReputation({ halfLifeMs: 1000, successFactor: 0.25, coolDownMs: 100 });
    rep.failure('a', T0);
    rep.failure('a', T0);
    expect(rep.standing('a', T0).consecutiveFailures).toBe(2);
    const after = rep.success('a', T0);
    expect(after.penalty).toBeCloseTo(0.5, 10);
    expect(after.consecutiveFailures).toBe(0);
    // The next failure starts a new streak: the base cool-down again.
    expect(rep.failure('a', T0 + 10_000).coolDownUntil).toBe(T0 + 10_000 + 100);
  });

  it('cools a node down, doubling per failure in a row up to the maximum', () => {
    const rep = createReputation({ coolDownMs: 1000, maxCoolDownMs: 5000 });
    expect(rep.failure('a', T0).coolDownUntil).toBe(T0 + 1000);
    expect(rep.coolingDown('a', T0 + 999)).toBe(true);
    expect(rep.coolingDown('a', T0 + 1000)).toBe(false);
    expect(rep.failure('a', T0 + 1000).coolDownUntil).toBe(T0 + 3000);
    expect(rep.failure('a', T0 + 3000).coolDownUntil).toBe(T0 + 7000);
    expect(rep.failure('a', T0 + 7000).coolDownUntil).toBe(T0 + 12_000);
    for (let i = 0; i < 80; i++) rep.failure('a', T0 + 7000);
    expect(rep.standing('a', T0 + 7000).coolDownUntil).toBe(T0 + 12_000);
    expect(rep.coolingDown('b', T0)).toBe(false);
  });

  it('never shortens a cool-down already running', () => {
    const rep = createReputation({ coolDownMs: 1000, maxCoolDownMs: 1000 });
    rep.failure('a', T0 + 5000);
    expect(rep.failure('a', T0).coolDownUntil).toBe(T0 + 6000);
  });

  it('does not grow a penalty when the clock steps back', () => {
    const rep = createReputation({ halfLifeMs: 1000 });
    rep.failure('a', T0);
    expect(rep.standing('a', T0 - 5000).penalty).toBe(1);
  });

  it('forgets nodes whose penalty decayed and cool-down ended', () => {
    const rep = createReputation({ halfLifeMs: 1000, coolDownMs: 500, forgetBelow: 0.1 });
    rep.failure('a', T0);
    rep.failure('b', T0 + 10_000);
    expect(rep.prune(T0 + 1000)).toEqual([]);
    expect(rep.prune(T0 + 4000)).toEqual(['a']);
    expect(rep.size).toBe(1);
    expect(rep.standing('a', T0 + 4000).penalty).toBe(0);
  });

  it('rejects bad options and times', () => {
    expect(() => createReputation({ halfLifeMs: 0 })).toThrow(/halfLifeMs/);
    expect(() => createReputation({ halfLifeMs: Number.NaN })).toThrow(/halfLifeMs/);
    expect(() => createReputation({ failurePenalty: -1 })).toThrow(/failurePenalty/);
    expect(() => createReputation({ successFactor: 1.5 })).toThrow(/successFactor/);
    expect(() => createReputation({ coolDownMs: -1 })).toThrow(/coolDownMs/);
    expect(() => createReputation({ coolDownMs: 10, maxCoolDownMs: 5 })).toThrow(/maxCoolDownMs/);
    const rep = createReputation();
    expect(() => rep.failure('a', Number.NaN)).toThrow(/now/);
    expect(() => rep.standing('a', Number.POSITIVE_INFINITY)).toThrow(/now/);
  });
});
