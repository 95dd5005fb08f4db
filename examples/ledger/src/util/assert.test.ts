import { describe, expect, it } from 'vitest';
import { invariant, LedgerError } from './assert.ts';

describe('invariant', () => {
  it('passes silently when the condition holds', () => {
    expect(() => invariant(1 + 1 === 2, 'math', 'broken')).not.toThrow();
  });

  it('throws a LedgerError carrying the code and message', () => {
    let caught: unknown;
    try {
      invariant(false, 'E_TEST', 'it failed');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(LedgerError);
    expect(caught).toBeInstanceOf(Error);
    expect((caught as LedgerError).code).toBe('E_TEST');
    expect((caught as LedgerError).message).toBe('it failed');
    expect((caught as LedgerError).name).toBe('LedgerError');
  });

  it('treats falsy values as failures', () => {
    for (const value of [0, '', null, undefined, Number.NaN]) {
      expect(() => invariant(value, 'E_FALSY', 'falsy')).toThrow(LedgerError);
    }
  });
});
