import { describe, expect, it } from 'vitest';
import { money } from '../money/amount.ts';
import { credit, debit, entry } from './entry.ts';
import { Journal } from './journal.ts';

const sale = (date: string, amount: string) =>
  entry(date, `Sale ${amount}`, [debit('1000', money(amount, 'USD')), credit('4000', money(amount, 'USD'))]);

describe('Journal', () => {
  it('numbers entries from 1 in posting order', () => {
    const j = new Journal();
    expect(j.post(sale('2026-01-01', '10')).seq).toBe(1);
    expect(j.post(sale('2026-01-01', '20')).seq).toBe(2);
    expect(j.size).toBe(2);
    expect(j.get(2).memo).toBe('Sale 20');
  });

  it('refuses backdated entries', () => {
    const j = new Journal();
    j.post(sale('2026-02-01', '10'));
    expect(() => j.post(sale('2026-01-31', '10'))).toThrow(/before the last posted entry/);
    expect(j.size).toBe(1);
  });

  it('filters entries by inclusive date range', () => {
    const j = new Journal();
    for (const d of ['2026-01-01', '2026-01-15', '2026-01-31', '2026-02-01']) j.post(sale(d, '1'));
    expect(j.between('2026-01-15', '2026-01-31').map((p) => p.seq)).toEqual([2, 3]);
    expect(j.between('2026-03-01', '2026-03-31')).toEqual([]);
  });

  it('hands out copies, not its internal list', () => {
    const j = new Journal();
    j.post(sale('2026-01-01', '1'));
    const list = j.entries() as unknown[];
    list.length = 0;
    expect(j.size).toBe(1);
    expect(() => j.get(5)).toThrow(/no entry #5/);
  });
});
