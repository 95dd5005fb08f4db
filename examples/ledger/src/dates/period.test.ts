import { describe, expect, it } from 'vitest';
import { daysInMonth, fiscalQuarter, inPeriod, isIsoDate, monthOf } from './period.ts';

describe('calendar', () => {
  it('validates ISO dates including leap days', () => {
    expect(isIsoDate('2024-02-29')).toBe(true);
    expect(isIsoDate('2026-02-29')).toBe(false);
    expect(isIsoDate('2026-13-01')).toBe(false);
    expect(isIsoDate('2026-1-01')).toBe(false);
    expect(daysInMonth(2000, 2)).toBe(29);
    expect(daysInMonth(1900, 2)).toBe(28);
  });

  it('finds the month of a date', () => {
    expect(monthOf('2024-02-10')).toEqual({ from: '2024-02-01', to: '2024-02-29' });
    expect(monthOf('2026-12-31')).toEqual({ from: '2026-12-01', to: '2026-12-31' });
    expect(() => monthOf('2026-02-30')).toThrow(/invalid date/);
  });
});

describe('fiscalQuarter', () => {
  it('uses calendar quarters by default', () => {
    expect(fiscalQuarter('2026-05-10')).toEqual({ from: '2026-04-01', to: '2026-06-30', quarter: 2 });
    expect(fiscalQuarter('2026-12-31').quarter).toBe(4);
  });

  it('shifts quarters for a fiscal year starting in April', () => {
    expect(fiscalQuarter('2026-05-10', 4)).toEqual({ from: '2026-04-01', to: '2026-06-30', quarter: 1 });
    expect(fiscalQuarter('2026-02-01', 4)).toEqual({ from: '2026-01-01', to: '2026-03-31', quarter: 4 });
  });

  it('handles quarters that straddle a year end', () => {
    expect(fiscalQuarter('2027-01-15', 11)).toEqual({ from: '2026-11-01', to: '2027-01-31', quarter: 1 });
    expect(fiscalQuarter('2026-12-01', 12)).toEqual({ from: '2026-12-01', to: '2027-02-28', quarter: 1 });
  });

  it('rejects bad input', () => {
    expect(() => fiscalQuarter('2026-01-01', 13)).toThrow(/startMonth/);
    expect(() => fiscalQuarter('nope')).toThrow(/invalid date/);
    expect(inPeriod('2026-03-31', { from: '2026-01-01', to: '2026-03-31' })).toBe(true);
    expect(inPeriod('2026-04-01', { from: '2026-01-01', to: '2026-03-31' })).toBe(false);
  });
});
