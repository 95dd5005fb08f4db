import { describe, expect, it } from 'vitest';
import { money } from '../money/amount.ts';
import { credit, debit, entry } from './entry.ts';

const usd = (v: string) => money(v, 'USD');

describe('entry', () => {
  it('accepts a balanced entry and freezes it', () => {
    const e = entry('2026-01-05', 'Sale', [debit('1000', usd('120')), credit('4000', usd('120'))]);
    expect(e.lines).toHaveLength(2);
    expect(Object.isFrozen(e)).toBe(true);
    expect(Object.isFrozen(e.lines)).toBe(true);
  });

  it('accepts split lines that balance in total', () => {
    const e = entry('2026-01-05', 'Sale with tax', [
      debit('1000', usd('107.50')),
      credit('4000', usd('100')),
      credit('2100', usd('7.50')),
    ]);
    expect(e.lines.map((l) => l.side)).toEqual(['debit', 'credit', 'credit']);
  });

  it('rejects unbalanced entries, naming the currency', () => {
    expect(() =>
      entry('2026-01-05', 'Oops', [debit('1000', usd('10')), credit('4000', usd('9.99'))]),
    ).toThrow(/unbalanced in USD: 10.00 USD vs 9.99 USD/);
  });

  it('balances each currency separately', () => {
    const lines = [
      debit('1000', usd('10')),
      credit('4000', usd('10')),
      debit('1100', money('5', 'EUR')),
      credit('4100', money('4', 'EUR')),
    ];
    expect(() => entry('2026-01-05', 'Mixed', lines)).toThrow(/unbalanced in EUR/);
  });

  it('rejects bad dates, single lines and non-positive amounts', () => {
    const ok = [debit('1000', usd('1')), credit('4000', usd('1'))];
    expect(() => entry('5/1/2026', 'x', ok)).toThrow(/invalid date/);
    expect(() => entry('2026-01-05', 'x', [debit('1000', usd('1'))])).toThrow(/at least two lines/);
    expect(() => entry('2026-01-05', 'x', [debit('1000', usd('0')), credit('4000', usd('0'))])).toThrow(
      /must be positive/,
    );
    expect(() => entry('2026-01-05', 'x', [debit('1000', usd('-1')), credit('4000', usd('-1'))])).toThrow(
      /must be positive/,
    );
  });
});
