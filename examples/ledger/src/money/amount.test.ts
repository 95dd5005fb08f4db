import { describe, expect, it } from 'vitest';
import { divideHalfEven, Money, money, sum, zero } from './amount.ts';

describe('money()', () => {
  it('parses decimal text exactly into minor units', () => {
    expect(money('12.34', 'USD').minor).toBe(1234n);
    expect(money('12.3', 'USD').minor).toBe(1230n);
    expect(money('-0.01', 'USD').minor).toBe(-1n);
    expect(money('1500', 'JPY').minor).toBe(1500n);
    expect(money('0.001', 'KWD').minor).toBe(1n);
  });

  it('rejects more decimals than the currency has, and non-numbers', () => {
    expect(() => money('1.234', 'USD')).toThrow(/more than 2 decimals/);
    expect(() => money('1.5', 'JPY')).toThrow(/more than 0 decimals/);
    expect(() => money('abc', 'USD')).toThrow(/not a decimal/);
    expect(() => money('1e3', 'USD')).toThrow(/not a decimal/);
  });
});

describe('Money arithmetic', () => {
  it('adds and subtracts within one currency', () => {
    const a = money('10.05', 'EUR');
    const b = money('0.95', 'EUR');
    expect(a.add(b).toDecimal()).toBe('11.00');
    expect(b.subtract(a).toDecimal()).toBe('-9.10');
    expect(a.negate().negate().equals(a)).toBe(true);
  });

  it('refuses to mix currencies', () => {
    expect(() => money('1', 'EUR').add(money('1', 'USD'))).toThrow(/cannot combine EUR with USD/);
    expect(() => money('1', 'EUR').compare(money('1', 'USD'))).toThrow();
    expect(money('1', 'EUR').equals(money('1', 'USD'))).toBe(false);
  });

  it('compares amounts', () => {
    expect(money('1', 'USD').compare(money('2', 'USD'))).toBe(-1);
    expect(money('2', 'USD').compare(money('2.00', 'USD'))).toBe(0);
    expect(money('-1', 'USD').isNegative()).toBe(true);
    expect(zero('USD').isZero()).toBe(true);
  });

  it('multiplies by a decimal factor with banker rounding', () => {
    expect(money('10.00', 'USD').multiply('0.075').toDecimal()).toBe('0.75');
    expect(money('0.05', 'USD').multiply('0.5').toDecimal()).toBe('0.02');
    expect(money('0.15', 'USD').multiply('0.5').toDecimal()).toBe('0.08');
    expect(money('-0.15', 'USD').multiply('0.5').toDecimal()).toBe('-0.08');
    expect(money('3', 'USD').multiply('-2').toDecimal()).toBe('-6.00');
  });
});

describe('allocate', () => {
  it('never loses or invents a cent', () => {
    const parts = money('100.00', 'USD').allocate([1, 1, 1]);
    expect(parts.map((p) => p.toDecimal())).toEqual(['33.34', '33.33', '33.33']);
    expect(sum(parts, 'USD').toDecimal()).toBe('100.00');
  });

  it('gives the remainder to the largest fractional parts', () => {
    const parts = money('0.05', 'USD').allocate([3, 7]);
    expect(parts.map((p) => p.minor)).toEqual([2n, 3n]);
  });

  it('keeps the sign of negative amounts', () => {
    const parts = money('-10.00', 'USD').allocate([1, 2]);
    expect(parts.map((p) => p.toDecimal())).toEqual(['-3.33', '-6.67']);
  });

  it('rejects empty, fractional and all-zero ratios', () => {
    const m = money('1', 'USD');
    expect(() => m.allocate([])).toThrow(/at least one/);
    expect(() => m.allocate([0.5, 1])).toThrow(/integers/);
    expect(() => m.allocate([0, 0])).toThrow(/not all be zero/);
  });
});

describe('formatting', () => {
  it('pads fractions and handles zero-decimal currencies', () => {
    expect(money('0.5', 'USD').toDecimal()).toBe('0.50');
    expect(money('-0.005', 'KWD').toDecimal()).toBe('-0.005');
    expect(money('42', 'JPY').toString()).toBe('42 JPY');
    expect(new Money(7n, money('0', 'EUR').currency).toString()).toBe('0.07 EUR');
  });
});

describe('divideHalfEven', () => {
  it('rounds halves to the even neighbour', () => {
    expect(divideHalfEven(5n, 2n)).toBe(2n);
    expect(divideHalfEven(7n, 2n)).toBe(4n);
    expect(divideHalfEven(-5n, 2n)).toBe(-2n);
    expect(divideHalfEven(10n, 3n)).toBe(3n);
    expect(divideHalfEven(11n, 3n)).toBe(4n);
  });
});
