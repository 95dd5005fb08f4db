import { invariant } from '../util/assert.ts';

/** An inclusive range of ISO dates. */
export interface Period {
  readonly from: string;
  readonly to: string;
}

/** True for a real calendar date in YYYY-MM-DD form. */
export function isIsoDate(text: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth(y, mo);
}

/** Days in month `month` (1-12) of `year`, leap years included. */
export function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function iso(year: number, month: number, day: number): string {
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

/** The calendar month containing `date`. */
export function monthOf(date: string): Period {
  invariant(isIsoDate(date), 'E_DATE', `invalid date "${date}"`);
  const y = Number(date.slice(0, 4));
  const m = Number(date.slice(5, 7));
  return { from: iso(y, m, 1), to: iso(y, m, daysInMonth(y, m)) };
}

/**
 * The fiscal quarter containing `date` for a fiscal year starting in `startMonth` (1-12), and its
 * number 1-4. With startMonth 4, 2026-05-10 is in Q1 (April-June 2026) and 2026-02-01 in Q4.
 */
export function fiscalQuarter(date: string, startMonth = 1): Period & { quarter: number } {
  invariant(isIsoDate(date), 'E_DATE', `invalid date "${date}"`);
  invariant(
    Number.isInteger(startMonth) && startMonth >= 1 && startMonth <= 12,
    'E_FISCAL',
    'startMonth must be 1-12',
  );
  const y = Number(date.slice(0, 4));
  const m = Number(date.slice(5, 7));
  const offset = (m - startMonth + 12) % 12;
  const quarter = Math.floor(offset / 3) + 1;
  const firstMonthIndex = m - (offset % 3); // may be <= 0: the quarter began last year
  const start = new Date(Date.UTC(y, firstMonthIndex - 1, 1));
  const end = new Date(Date.UTC(y, firstMonthIndex + 2, 0));
  const fmt = (d: Date) => iso(d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate());
  return { from: fmt(start), to: fmt(end), quarter };
}

/** True when `date` lies within `period`. */
export function inPeriod(date: string, period: Period): boolean {
  return date >= period.from && date <= period.to;
}
