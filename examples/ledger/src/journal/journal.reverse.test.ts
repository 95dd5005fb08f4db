import { describe, expect, it } from 'vitest';
import { money } from '../money/amount.ts';
import { credit, debit, entry } from './entry.ts';
import { Journal } from './journal.ts';

describe('Journal.reverse', () => {
  const build = () => {
    const j = new Journal();
    j.post(
      entry('2026-03-01', 'Rent', [
        debit('6100', money('1500', 'USD')),
        credit('1000', money('1500', 'USD')),
      ]),
    );
    return j;
  };

  it('posts the mirror image and links it to the original', () => {
    const j = build();
    const r = j.reverse(1, '2026-03-02');
    expect(r.seq).toBe(2);
    expect(r.reverses).toBe(1);
    expect(r.memo).toBe('Reversal of #1: Rent');
    expect(r.lines.map((l) => [l.account, l.side, l.amount.toDecimal()])).toEqual([
      ['6100', 'credit', '1500.00'],
      ['1000', 'debit', '1500.00'],
    ]);
    expect(j.get(2).reverses).toBe(1);
  });

  it('reverses an entry at most once and never a reversal', () => {
    const j = build();
    j.reverse(1, '2026-03-02');
    expect(() => j.reverse(1, '2026-03-03')).toThrow(/already reversed/);
    expect(() => j.reverse(2, '2026-03-03')).toThrow(/itself a reversal/);
    expect(() => j.reverse(7, '2026-03-03')).toThrow(/no entry #7/);
  });

  it('obeys the posting date rule', () => {
    const j = build();
    expect(() => j.reverse(1, '2026-02-28')).toThrow(/before the last posted entry/);
  });
});
