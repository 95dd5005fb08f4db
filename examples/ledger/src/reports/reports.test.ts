import { credit, debit, entry } from '@ledger/journal/entry.ts';
import { describe, expect, it } from 'vitest';
import { account, ChartOfAccounts, Journal, money } from '../index.ts';
import { incomeStatement } from './income.ts';
import { trialBalance } from './trial-balance.ts';

const usd = (v: string) => money(v, 'USD');

function books() {
  const chart = new ChartOfAccounts()
    .add(account('1000', 'Cash', 'asset'))
    .add(account('2000', 'Payables', 'liability'))
    .add(account('3000', 'Capital', 'equity'))
    .add(account('4000', 'Sales', 'income'))
    .add(account('4100', 'Interest', 'income'))
    .add(account('6000', 'Rent', 'expense'))
    .add(account('6100', 'Supplies', 'expense'));
  const j = new Journal();
  j.post(entry('2026-01-01', 'Capital', [debit('1000', usd('5000')), credit('3000', usd('5000'))]));
  j.post(entry('2026-01-10', 'Sale', [debit('1000', usd('1200')), credit('4000', usd('1200'))]));
  j.post(entry('2026-01-20', 'Rent', [debit('6000', usd('800')), credit('1000', usd('800'))]));
  j.post(entry('2026-02-03', 'Supplies on credit', [debit('6100', usd('150')), credit('2000', usd('150'))]));
  j.post(entry('2026-02-15', 'Interest', [debit('1000', usd('12.34')), credit('4100', usd('12.34'))]));
  return { chart, j };
}

describe('trialBalance', () => {
  it('puts each balance in its natural column and balances', () => {
    const { chart, j } = books();
    const tb = trialBalance(j.entries(), chart, 'USD');
    expect(tb.rows.map((r) => [r.code, r.debit.toDecimal(), r.credit.toDecimal()])).toEqual([
      ['1000', '5412.34', '0.00'],
      ['2000', '0.00', '150.00'],
      ['3000', '0.00', '5000.00'],
      ['4000', '0.00', '1200.00'],
      ['4100', '0.00', '12.34'],
      ['6000', '800.00', '0.00'],
      ['6100', '150.00', '0.00'],
    ]);
    expect(tb.totalDebit.toDecimal()).toBe('6362.34');
    expect(tb.balanced).toBe(true);
  });

  it('shows an overdrawn asset in the credit column and omits zero balances', () => {
    const chart = new ChartOfAccounts()
      .add(account('1000', 'Bank', 'asset'))
      .add(account('1100', 'Float', 'asset'))
      .add(account('6000', 'Fees', 'expense'));
    const j = new Journal();
    j.post(entry('2026-01-01', 'Fee', [debit('6000', usd('20')), credit('1000', usd('20'))]));
    j.post(entry('2026-01-02', 'Move', [debit('1100', usd('5')), credit('1000', usd('5'))]));
    j.post(entry('2026-01-03', 'Back', [debit('1000', usd('5')), credit('1100', usd('5'))]));
    const tb = trialBalance(j.entries(), chart, 'USD');
    expect(tb.rows.map((r) => [r.code, r.debit.toDecimal(), r.credit.toDecimal()])).toEqual([
      ['1000', '0.00', '20.00'],
      ['6000', '20.00', '0.00'],
    ]);
  });
});

describe('incomeStatement', () => {
  it('reports income, expenses and net for a period', () => {
    const { chart, j } = books();
    const jan = incomeStatement(j, chart, '2026-01-01', '2026-01-31', 'USD');
    expect(jan.income.map((r) => r.code)).toEqual(['4000']);
    expect(jan.totalIncome.toDecimal()).toBe('1200.00');
    expect(jan.totalExpenses.toDecimal()).toBe('800.00');
    expect(jan.net.toDecimal()).toBe('400.00');
  });

  it('reports a loss as a negative net', () => {
    const { chart, j } = books();
    const feb = incomeStatement(j, chart, '2026-02-01', '2026-02-28', 'USD');
    expect(feb.income.map((r) => [r.name, r.amount.toDecimal()])).toEqual([['Interest', '12.34']]);
    expect(feb.expenses.map((r) => [r.name, r.amount.toDecimal()])).toEqual([['Supplies', '150.00']]);
    expect(feb.net.toDecimal()).toBe('-137.66');
    expect(incomeStatement(j, chart, '2027-01-01', '2027-12-31', 'USD').net.isZero()).toBe(true);
  });
});
