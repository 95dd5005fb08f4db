import { beforeEach, describe, expect, it } from 'vitest';
import { account, normalSide, parentCode } from '../../src/accounts/account.ts';
import { ChartOfAccounts, compareCodes } from '../../src/accounts/chart.ts';

describe('account', () => {
  it('validates code, name and kind', () => {
    expect(account('1000', ' Cash ', 'asset')).toEqual({ code: '1000', name: 'Cash', kind: 'asset' });
    expect(() => account('10a', 'Cash', 'asset')).toThrow(/invalid account code/);
    expect(() => account('1000.', 'Cash', 'asset')).toThrow(/invalid account code/);
    expect(() => account('1000', '  ', 'asset')).toThrow(/needs a name/);
    expect(() => account('1000', 'Cash', 'assets')).toThrow(/unknown account kind/);
  });

  it('knows the normal side of each kind', () => {
    expect(normalSide('asset')).toBe('debit');
    expect(normalSide('expense')).toBe('debit');
    expect(normalSide('liability')).toBe('credit');
    expect(normalSide('equity')).toBe('credit');
    expect(normalSide('income')).toBe('credit');
  });

  it('derives parent codes', () => {
    expect(parentCode('1000')).toBeNull();
    expect(parentCode('1000.10')).toBe('1000');
    expect(parentCode('1000.10.2')).toBe('1000.10');
  });
});

describe('ChartOfAccounts', () => {
  let chart: ChartOfAccounts;
  beforeEach(() => {
    chart = new ChartOfAccounts()
      .add(account('1000', 'Assets', 'asset'))
      .add(account('1000.10', 'Bank', 'asset'))
      .add(account('1000.10.1', 'Checking', 'asset'))
      .add(account('1000.2', 'Petty cash', 'asset'))
      .add(account('4000', 'Sales', 'income'));
  });

  it('rejects duplicates, orphans and kind mismatches', () => {
    expect(() => chart.add(account('1000', 'Again', 'asset'))).toThrow(/already exists/);
    expect(() => chart.add(account('3000.1', 'Orphan', 'equity'))).toThrow(/has no parent 3000/);
    expect(() => chart.add(account('4000.1', 'Odd', 'expense'))).toThrow(/is expense but its parent/);
  });

  it('orders codes numerically per segment', () => {
    expect(chart.all().map((a) => a.code)).toEqual(['1000', '1000.2', '1000.10', '1000.10.1', '4000']);
    expect(compareCodes('2', '10')).toBeLessThan(0);
    expect(compareCodes('1000', '1000.1')).toBeLessThan(0);
    expect(compareCodes('1000.1', '1000.1')).toBe(0);
  });

  it('walks children, descendants and paths', () => {
    expect(chart.children('1000').map((a) => a.code)).toEqual(['1000.2', '1000.10']);
    expect(chart.descendants('1000').map((a) => a.code)).toEqual(['1000.2', '1000.10', '1000.10.1']);
    expect(chart.descendants('4000')).toEqual([]);
    expect(chart.path('1000.10.1')).toEqual(['Assets', 'Bank', 'Checking']);
  });

  it('looks accounts up', () => {
    expect(chart.has('1000.10')).toBe(true);
    expect(chart.get('4000').name).toBe('Sales');
    expect(() => chart.get('9999')).toThrow(/no account 9999/);
  });
});
