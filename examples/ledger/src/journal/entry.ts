import { type Money, sum } from '../money/amount.ts';
import { invariant } from '../util/assert.ts';

/** One line of a journal entry: an amount on one side of one account. */
export interface EntryLine {
  readonly account: string;
  readonly side: 'debit' | 'credit';
  readonly amount: Money;
}

/** A balanced journal entry: debits equal credits in every currency. */
export interface JournalEntry {
  readonly date: string;
  readonly memo: string;
  readonly lines: readonly EntryLine[];
}

/** Shorthand for a debit line. */
export function debit(account: string, amount: Money): EntryLine {
  return { account, side: 'debit', amount };
}

/** Shorthand for a credit line. */
export function credit(account: string, amount: Money): EntryLine {
  return { account, side: 'credit', amount };
}

/**
 * Validates and freezes an entry: an ISO date, at least two lines, positive amounts, and debits equal
 * to credits per currency.
 */
export function entry(date: string, memo: string, lines: EntryLine[]): JournalEntry {
  invariant(/^\d{4}-\d{2}-\d{2}$/.test(date), 'E_DATE', `invalid date "${date}"`);
  invariant(lines.length >= 2, 'E_ENTRY_LINES', 'an entry needs at least two lines');
  for (const line of lines)
    invariant(
      !line.amount.isNegative() && !line.amount.isZero(),
      'E_ENTRY_AMOUNT',
      `line for ${line.account} must be positive`,
    );
  for (const code of new Set(lines.map((l) => l.amount.currency.code))) {
    const of = (side: EntryLine['side']) =>
      sum(
        lines.filter((l) => l.side === side && l.amount.currency.code === code).map((l) => l.amount),
        code,
      );
    const d = of('debit');
    const c = of('credit');
    invariant(d.equals(c), 'E_UNBALANCED', `entry "${memo}" is unbalanced in ${code}: ${d} vs ${c}`);
  }
  return Object.freeze({ date, memo, lines: Object.freeze([...lines]) });
}
