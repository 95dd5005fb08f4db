import { describe, expect, it } from 'vitest';
import { normaliseDate, parseStatement } from './statement.ts';

describe('normaliseDate', () => {
  it('accepts ISO and day/month/year dates', () => {
    expect(normaliseDate('2026-01-31')).toBe('2026-01-31');
    expect(normaliseDate('31/01/2026')).toBe('2026-01-31');
    expect(normaliseDate('1/2/2026')).toBe('2026-02-01');
    expect(() => normaliseDate('Jan 31')).toThrow(/unrecognised date/);
  });
});

describe('parseStatement', () => {
  it('reads a signed amount column with thousands separators', () => {
    const csv = 'Date,Text,Amount\n02/01/2026, Coffee ,-3.50\n03/01/2026,Salary,"2,500.00"\n';
    const lines = parseStatement(csv, 'EUR', { date: 'Date', description: 'Text', amount: 'Amount' });
    expect(lines.map((l) => [l.date, l.description, l.amount.toString()])).toEqual([
      ['2026-01-02', 'Coffee', '-3.50 EUR'],
      ['2026-01-03', 'Salary', '2500.00 EUR'],
    ]);
  });

  it('reads separate money-in and money-out columns', () => {
    const csv = 'when,what,in,out\n2026-01-05,Refund,12.00,\n2026-01-06,Rent,,"1,000"\n';
    const lines = parseStatement(csv, 'USD', {
      date: 'when',
      description: 'what',
      moneyIn: 'in',
      moneyOut: 'out',
    });
    expect(lines.map((l) => l.amount.toDecimal())).toEqual(['12.00', '-1000.00']);
  });

  it('rejects rows with both or neither of in/out, and unknown columns', () => {
    const cols = { date: 'd', description: 't', moneyIn: 'in', moneyOut: 'out' };
    expect(() => parseStatement('d,t,in,out\n2026-01-01,x,1,1\n', 'USD', cols)).toThrow(/exactly one/);
    expect(() => parseStatement('d,t,in,out\n2026-01-01,x,,\n', 'USD', cols)).toThrow(/exactly one/);
    expect(() =>
      parseStatement('d,t,amt\n2026-01-01,x,1\n', 'USD', { date: 'day', description: 't', amount: 'amt' }),
    ).toThrow(/no column "day"/);
    expect(() => parseStatement('d,t\n', 'USD', { date: 'd', description: 't' })).toThrow(
      /need an amount column/,
    );
  });
});
