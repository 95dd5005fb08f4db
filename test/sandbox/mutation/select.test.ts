import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enumerateMutants } from '../../../sandbox/mutation/mutants.ts';
import { DEFAULT_MAX_MUTANTS, selectMutants } from '../../../sandbox/mutation/select.ts';
import { REPO_ROOT } from '../fixtures.ts';

/** One function with many mutation points and five small ones. */
const LOPSIDED = [
  'export function huge(a, b, c) {',
  ...Array.from({ length: 40 }, (_, i) => `  if (a + ${i} < b * c && a !== ${i}) b -= c || ${i};`),
  '  return [a, b, c];',
  '}',
  ...['one', 'two', 'three', 'four', 'five'].map(
    (n) => `export function ${n}(x) { return x > 1 ? 'big' : x - 1; }`,
  ),
].join('\n');

const count = <T>(xs: T[]) => xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<T, number>());

describe('selectMutants', () => {
  it('caps the number, spreads across functions so one huge function does not starve the others', () => {
    const all = enumerateMutants(LOPSIDED, 'x.js');
    const huge = all.filter((m) => m.fn === 'huge').length;
    expect(huge).toBeGreaterThan(300);
    const picked = selectMutants(all, { max: 12 });
    expect(picked).toHaveLength(12);
    const perFn = count(picked.map((m) => m.fn));
    // Six functions take turns: two each.
    expect([...perFn.entries()].sort()).toEqual(
      ['five', 'four', 'huge', 'one', 'three', 'two'].map((f) => [f, 2] as [string, number]),
    );
  });

  it('spreads across operators within a function', () => {
    const all = enumerateMutants(LOPSIDED, 'x.js').filter((m) => m.fn === 'huge');
    const picked = selectMutants(all, { max: 8 });
    const ops = count(picked.map((m) => m.operator));
    expect(ops.size).toBe(8); // eight turns, eight different operators
  });

  it('is deterministic and independent of the input order; returns source order', () => {
    const all = enumerateMutants(LOPSIDED, 'x.js');
    const a = selectMutants(all);
    expect(a).toHaveLength(DEFAULT_MAX_MUTANTS);
    expect(selectMutants([...all].reverse())).toEqual(a);
    expect(selectMutants(enumerateMutants(LOPSIDED, 'x.js'))).toEqual(a);
    const starts = a.map((m) => m.start);
    expect(starts).toEqual([...starts].sort((x, y) => x - y));
  });

  it('takes everything when there are fewer mutants than the cap; refuses a bad cap', () => {
    const all = enumerateMutants('export const f = (a) => a + 1;', 'x.js');
    expect(selectMutants(all)).toEqual(all);
    expect(selectMutants(all, { max: 0 })).toEqual([]);
    expect(() => selectMutants(all, { max: -1 })).toThrow(RangeError);
    expect(() => selectMutants(all, { max: 1.5 })).toThrow(RangeError);
  });

  it('reaches every function of a real module (examples/ledger money/amount.ts)', async () => {
    const file = 'src/money/amount.ts';
    const all = enumerateMutants(await readFile(join(REPO_ROOT, 'examples', 'ledger', file), 'utf8'), file);
    const picked = selectMutants(all);
    const fns = new Set(all.map((m) => m.fn));
    expect(new Set(picked.map((m) => m.fn))).toEqual(fns);
    expect(new Set(picked.map((m) => m.operator)).size).toBeGreaterThanOrEqual(10);
  });
});
