import { describe, expect, it } from 'vitest';
import { account } from '../accounts/account.ts';
import { ChartOfAccounts } from '../accounts/chart.ts';
import { credit, debit, entry } from '../journal/entry.ts';
import { Journal } from '../journal/journal.ts';
import { money } from '../money/amount.ts';
import { balances, rollup } from './balances.ts';

const usd = (v: string) => money(v, 'USD');

function setup() {
  const chart = new ChartOfAccounts()
    .add(account('1000', 'Assets', 'asset'))
    .add(account('1000.1', 'Checking', 'asset'))
    .add(account('1000.2', 'Savings', 'asset'))
    .add(account('3000', 'Equity', 'equity'))
    .add(account('4000', 'Sales', 'income'))
    .add(account('6000', 'Rent', 'expense'));
  const j = new Journal();
  j.post(entry('2026-01-01', 'Capital', [debit('1000.1', usd('1000')), credit('3000', usd('1000'))]));
  j.post(entry('2026-01-02', 'Sale', [debit('1000.1', usd('250')), credit('4000', usd('250'))]));
  j.post(entry('2026-01-03', 'Rent', [debit('6000', usd('400')), credit('1000.1', usd('400'))]));
  j.post(entry('2026-01-04', 'Save', [debit('1000.2', usd('300')), credit('1000.1', usd('300'))]));
  return { chart, j };
}

describe('balances', () => {
  it('signs balances by each account normal side', () => {
    const { chart, j } = setup();
    const b = balances(j.entries(), chart, 'USD');
    expect(b.get('1000.1')?.toDecimal()).toBe('550.00');
    expect(b.get('1000.2')?.toDecimal()).toBe('300.00');
    expect(b.get('3000')?.toDecimal()).toBe('1000.00');
    expect(b.get('4000')?.toDecimal()).toBe('250.00');
    expect(b.get('6000')?.toDecimal()).toBe('400.00');
    expect(b.has('1000')).toBe(false);
  });

  it('keeps the accounting equation: assets = equity + income - expenses', () => {
    const { chart, j } = setup();
    const b = balances(j.entries(), chart, 'USD');
    const assets = rollup(chart, b, '1000', 'USD');
    const rhs = b.get('3000')!.add(b.get('4000')!).subtract(b.get('6000')!);
    expect(assets.equals(rhs)).toBe(true);
  });

  it('rolls sub-accounts up into their parent', () => {
    const { chart, j } = setup();
    const b = balances(j.entries(), chart, 'USD');
    expect(rollup(chart, b, '1000', 'USD').toDecimal()).toBe('850.00');
    expect(rollup(chart, b, '1000.2', 'USD').toDecimal()).toBe('300.00');
    expect(rollup(chart, new Map(), '1000', 'USD').isZero()).toBe(true);
  });

  it('rejects unknown accounts and foreign currencies', () => {
    const { chart, j } = setup();
    j.post(entry('2026-01-05', 'Typo', [debit('1999', usd('1')), credit('4000', usd('1'))]));
    expect(() => balances(j.entries(), chart, 'USD')).toThrow(/no account 1999/);
    const k = new Journal();
    k.post(
      entry('2026-01-05', 'Euro', [debit('1000.1', money('1', 'EUR')), credit('4000', money('1', 'EUR'))]),
    );
    expect(() => balances(k.entries(), chart, 'USD')).toThrow(/posts EUR to a USD ledger/);
  });
});
