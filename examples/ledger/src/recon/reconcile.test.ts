import { describe, expect, it } from 'vitest';
import { money } from '../money/amount.ts';
import { daysBetween, reconcile } from './reconcile.ts';

const usd = (v: string) => money(v, 'USD');
const item = (id: string, date: string, amount: string) => ({ id, date, amount: usd(amount) });

describe('daysBetween', () => {
  it('counts calendar days across months and leap years', () => {
    expect(daysBetween('2026-01-30', '2026-02-02')).toBe(3);
    expect(daysBetween('2024-02-28', '2024-03-01')).toBe(2);
    expect(daysBetween('2026-03-05', '2026-03-01')).toBe(-4);
  });
});

describe('reconcile', () => {
  it('matches equal amounts within the tolerance, closest date first', () => {
    const bank = [item('b1', '2026-01-10', '-50')];
    const book = [
      item('k1', '2026-01-06', '-50'),
      item('k2', '2026-01-09', '-50'),
      item('k3', '2026-01-10', '-5'),
    ];
    const r = reconcile(bank, book);
    expect(r.matched.map((m) => [m.bank.id, m.book.id, m.days])).toEqual([['b1', 'k2', 1]]);
    expect(r.unmatchedBook.map((k) => k.id)).toEqual(['k1', 'k3']);
    expect(r.unmatchedBank).toEqual([]);
  });

  it('matches each item at most once', () => {
    const bank = [item('b1', '2026-01-10', '20'), item('b2', '2026-01-11', '20')];
    const book = [item('k1', '2026-01-10', '20')];
    const r = reconcile(bank, book);
    expect(r.matched.map((m) => m.bank.id)).toEqual(['b1']);
    expect(r.unmatchedBank.map((b) => b.id)).toEqual(['b2']);
  });

  it('does not depend on input order', () => {
    const bank = [item('b2', '2026-01-12', '7'), item('b1', '2026-01-10', '7')];
    const book = [item('k2', '2026-01-12', '7'), item('k1', '2026-01-10', '7')];
    const a = reconcile(bank, book);
    const b = reconcile([...bank].reverse(), [...book].reverse());
    const pairs = (r: typeof a) => r.matched.map((m) => `${m.bank.id}-${m.book.id}`).sort();
    expect(pairs(a)).toEqual(['b1-k1', 'b2-k2']);
    expect(pairs(b)).toEqual(pairs(a));
  });

  it('respects the tolerance and the currency', () => {
    const bank = [item('b1', '2026-01-10', '10')];
    expect(reconcile(bank, [item('k1', '2026-01-14', '10')]).matched).toEqual([]);
    expect(reconcile(bank, [item('k1', '2026-01-14', '10')], 4).matched).toHaveLength(1);
    const eur = { id: 'k1', date: '2026-01-10', amount: money('10', 'EUR') };
    expect(reconcile(bank, [eur]).matched).toEqual([]);
    expect(() => reconcile(bank, [], -1)).toThrow(/tolerance/);
    expect(() => reconcile(bank, [], 1.5)).toThrow(/tolerance/);
  });
});
