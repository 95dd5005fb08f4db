import { describe, expect, it } from 'vitest';
import { computeReward, type RewardInput } from '../../sandbox/reward.ts';

const clean: RewardInput = {
  kind: 'file',
  truncated: false,
  runFailures: [],
  verdictReasons: [],
  passed: 4,
  failed: 0,
  typecheck: 'passed',
  tamper: [],
  lints: [],
};

describe('computeReward', () => {
  it('is the pass rate passed / (passed + failed) for a clean run', () => {
    expect(computeReward(clean)).toEqual({ reward: 1, passRate: 1, reasons: [] });
    const r = computeReward({ ...clean, passed: 3, failed: 1 });
    expect(r.reward).toBe(0.75);
    expect(r.reasons).toEqual(['1 of 4 tests failed']);
  });

  it('accepts a workspace without a type-check', () => {
    expect(computeReward({ ...clean, typecheck: 'not-configured' }).reward).toBe(1);
  });

  it.each([
    ['the generation was truncated', { truncated: true }],
    ['the candidate exhausted its CPU budget', { runFailures: ['the candidate exhausted its CPU budget'] }],
    ['the runner wrote no report', { runFailures: ['the runner wrote no report'] }],
    ['inventory', { verdictReasons: ['inventory'] }],
    ['tamper pattern added: eval (×2)', { tamper: [{ name: 'eval', added: 2 }] }],
    ['no test ran', { passed: 0, failed: 0 }],
    ['every test failed', { passed: 0, failed: 3 }],
    ['the strict type-check failed', { typecheck: 'failed' as const }],
    ['the strict type-check did not run', { typecheck: 'not-run' as const }],
  ])('is 0 when %s', (reason, patch) => {
    const r = computeReward({ ...clean, ...patch });
    expect(r.reward).toBe(0);
    expect(r.reasons).toContain(reason);
  });

  it('lists every zeroing reason, and no lint penalties then', () => {
    const r = computeReward({
      ...clean,
      truncated: true,
      runFailures: ['the candidate exhausted its CPU budget (120 s)'],
      typecheck: 'failed',
      lints: [{ name: 'any', added: 1 }],
    });
    expect(r.reward).toBe(0);
    expect(r.reasons).toEqual([
      'the generation was truncated',
      'the candidate exhausted its CPU budget (120 s)',
      'the strict type-check failed',
    ]);
  });

  it('multiplies by 0.9 per added lint, configurable', () => {
    const lints = [
      { name: 'any', added: 2 },
      { name: 'console.log', added: 1 },
    ];
    expect(computeReward({ ...clean, lints }).reward).toBeCloseTo(0.729, 9);
    expect(computeReward({ ...clean, lints, lintFactor: 0.5 }).reward).toBe(0.125);
    expect(computeReward({ ...clean, passed: 1, failed: 1, lints: [{ name: 'any', added: 1 }] }).reward).toBe(
      0.45,
    );
    expect(computeReward({ ...clean, lints }).reasons).toEqual([
      'lint added: any (×2, each ×0.9)',
      'lint added: console.log (×1, each ×0.9)',
    ]);
  });

  it('does not count skipped or todo tests (they are not inputs at all)', () => {
    expect(computeReward({ ...clean, passed: 2, failed: 0 }).passRate).toBe(1);
  });

  describe('tests tasks: strength, not count', () => {
    const strength = { killed: 6, of: 8, covered: 4, ofCovered: 5 };
    const tests: RewardInput = { ...clean, kind: 'tests', strength };
    it('is the share of the original tests kills the candidate kills too, times the lints', () => {
      expect(computeReward(tests).reward).toBe(0.75);
      expect(computeReward(tests).reasons).toEqual([
        'the tests kill 6 of the 8 mutants the original tests kill',
      ]);
      expect(computeReward({ ...tests, strength: { ...strength, killed: 8 } }).reward).toBe(1);
      expect(computeReward({ ...tests, lints: [{ name: 'any', added: 1 }] }).reward).toBeCloseTo(0.675, 9);
    });
    it.each([
      [
        'trivial tests kill nothing',
        { strength: { ...strength, killed: 0 } },
        'the tests kill none of the 8 mutants the original tests kill',
      ],
      [
        'tests that barely run the code',
        { strength: { ...strength, covered: 2 } },
        'the tests enter 2 of the 5 functions the original tests enter',
      ],
      [
        'a test that fails on the reference',
        { passed: 3, failed: 1 },
        "1 of the candidate's tests fail on the reference",
      ],
      ['an unknown strength', { strength: undefined }, 'the strength of the tests is unknown'],
      [
        'a task the original cannot judge',
        { strength: { ...strength, of: 0 } },
        'the original tests kill no mutant (the task cannot be judged)',
      ],
      ['no test', { passed: 0, failed: 0 }, 'no test ran'],
    ])('is 0 for %s', (_name, patch, reason) => {
      const r = computeReward({ ...tests, ...patch } as RewardInput);
      expect(r.reward).toBe(0);
      expect(r.reasons).toContain(reason);
    });
  });

  it('rejects impossible inputs', () => {
    expect(() => computeReward({ ...clean, lintFactor: 1.5 })).toThrow(RangeError);
    expect(() => computeReward({ ...clean, passed: -1 })).toThrow(RangeError);
    expect(() => computeReward({ ...clean, failed: 0.5 })).toThrow(RangeError);
  });
});
