import type { Money } from '../money/amount.ts';
import { invariant } from '../util/assert.ts';

/** Something with a date and an amount: a bank line or a book entry. */
export interface Dated {
  readonly date: string;
  readonly amount: Money;
}

export interface Reconciliation<B extends Dated, L extends Dated> {
  readonly matched: { bank: B; book: L; days: number }[];
  readonly unmatchedBank: B[];
  readonly unmatchedBook: L[];
}

/** Whole days from ISO date `a` to ISO date `b` (negative if b is earlier). */
export function daysBetween(a: string, b: string): number {
  const t = (d: string) => Date.UTC(Number(d.slice(0, 4)), Number(d.slice(5, 7)) - 1, Number(d.slice(8, 10)));
  return Math.round((t(b) - t(a)) / 86_400_000);
}

/**
 * Matches bank lines to book items of the same amount dated at most `toleranceDays` apart. Each item
 * matches once. Bank lines are taken in date order and each takes the closest book item (earliest on a
 * tie), so the result does not depend on input order.
 */
export function reconcile<B extends Dated, L extends Dated>(
  bank: readonly B[],
  book: readonly L[],
  toleranceDays = 3,
): Reconciliation<B, L> {
  invariant(
    Number.isInteger(toleranceDays) && toleranceDays >= 0,
    'E_TOLERANCE',
    'tolerance must be a whole number of days',
  );
  const byDate = <T extends Dated>(xs: readonly T[]) =>
    xs
      .map((x, i) => ({ x, i }))
      .sort((a, b) => (a.x.date < b.x.date ? -1 : a.x.date > b.x.date ? 1 : a.i - b.i));
  const open = byDate(book);
  const matched: Reconciliation<B, L>['matched'] = [];
  const unmatchedBank: B[] = [];
  for (const { x: line } of byDate(bank)) {
    let best = -1;
    let bestDays = Number.POSITIVE_INFINITY;
    open.forEach(({ x: item }, k) => {
      if (!item.amount.equals(line.amount)) return;
      const d = Math.abs(daysBetween(line.date, item.date));
      if (d <= toleranceDays && d < bestDays) {
        best = k;
        bestDays = d;
      }
    });
    if (best === -1) unmatchedBank.push(line);
    else {
      const [{ x: item }] = open.splice(best, 1) as [{ x: L; i: number }];
      matched.push({ bank: line, book: item, days: bestDays });
    }
  }
  return { matched, unmatchedBank, unmatchedBook: open.map((o) => o.x) };
}
