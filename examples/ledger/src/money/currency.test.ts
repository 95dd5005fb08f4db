import { describe, expect, it } from 'vitest';
import { currency, currencyCodes, isCurrencyCode } from './currency.ts';

describe('currency', () => {
  it('knows the minor units of common currencies', () => {
    expect(currency('USD')).toEqual({ code: 'USD', minorUnits: 2 });
    expect(currency('JPY').minorUnits).toBe(0);
    expect(currency('KWD').minorUnits).toBe(3);
  });

  it('rejects unknown codes with E_CURRENCY', () => {
    expect(() => currency('XYZ')).toThrow(
      expect.objectContaining({ name: 'LedgerError', code: 'E_CURRENCY' }),
    );
    expect(() => currency('usd')).toThrow(/unknown currency usd/);
  });

  it('does not treat Object prototype names as currencies', () => {
    expect(isCurrencyCode('toString')).toBe(false);
    expect(isCurrencyCode('constructor')).toBe(false);
    expect(isCurrencyCode('EUR')).toBe(true);
  });

  it('lists codes sorted', () => {
    const codes = currencyCodes();
    expect(codes).toEqual([...codes].sort());
    expect(codes).toContain('CHF');
  });
});
