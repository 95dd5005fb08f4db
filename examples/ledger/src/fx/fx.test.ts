import { describe, expect, it } from 'vitest';
import { money } from '../money/amount.ts';
import { convert, convertSum } from './convert.ts';
import { RateTable } from './rates.ts';

const table = () => new RateTable('USD').set('EUR', '0.92').set('JPY', '150.5').set('KWD', '0.307');

describe('RateTable', () => {
  it('keeps exact fractions and derives cross rates through the base', () => {
    const t = table();
    expect(t.fromBase('USD')).toEqual([1n, 1n]);
    expect(t.fromBase('EUR')).toEqual([92n, 100n]);
    expect(t.rate('EUR', 'JPY')).toEqual([1505n * 100n, 10n * 92n]);
    expect(t.codes()).toEqual(['EUR', 'JPY', 'KWD', 'USD']);
  });

  it('rejects bad rates and missing currencies', () => {
    expect(() => new RateTable('USD').set('USD', '1')).toThrow(/rate 1 by definition/);
    expect(() => new RateTable('USD').set('EUR', '0')).toThrow(/invalid rate/);
    expect(() => new RateTable('USD').set('EUR', '-1')).toThrow(/invalid rate/);
    expect(() => table().rate('USD', 'GBP')).toThrow(/no rate for GBP against USD/);
  });
});

describe('convert', () => {
  it('converts from and to the base', () => {
    expect(convert(money('100', 'USD'), 'EUR', table()).toString()).toBe('92.00 EUR');
    expect(convert(money('92', 'EUR'), 'USD', table()).toString()).toBe('100.00 USD');
  });

  it('handles currencies with different minor units', () => {
    expect(convert(money('10', 'USD'), 'JPY', table()).toString()).toBe('1505 JPY');
    expect(convert(money('1505', 'JPY'), 'USD', table()).toString()).toBe('10.00 USD');
    expect(convert(money('1', 'USD'), 'KWD', table()).toString()).toBe('0.307 KWD');
  });

  it('rounds once, half to even', () => {
    // 0.01 USD -> 0.0092 EUR rounds to 0.01; 0.05 EUR -> 0.054347... USD rounds to 0.05
    expect(convert(money('0.01', 'USD'), 'EUR', table()).toDecimal()).toBe('0.01');
    expect(convert(money('0.05', 'EUR'), 'USD', table()).toDecimal()).toBe('0.05');
    const t = new RateTable('USD').set('EUR', '0.5');
    expect(convert(money('0.01', 'USD'), 'EUR', t).toDecimal()).toBe('0.00');
    expect(convert(money('0.03', 'USD'), 'EUR', t).toDecimal()).toBe('0.02');
  });

  it('returns same-currency amounts unchanged and sums mixed amounts', () => {
    const m = money('3.21', 'EUR');
    expect(convert(m, 'EUR', table())).toBe(m);
    const total = convertSum([money('50', 'USD'), money('46', 'EUR'), money('1505', 'JPY')], 'USD', table());
    expect(total.toString()).toBe('110.00 USD');
  });
});
