import { normalSide } from '../accounts/account.ts';
import type { ChartOfAccounts } from '../accounts/chart.ts';
import type { Posted } from '../journal/journal.ts';
import { balances } from '../ledger/balances.ts';
import { type Money, zero } from '../money/amount.ts';

export interface TrialBalanceRow {
  readonly code: string;
  readonly name: string;
  readonly debit: Money;
  readonly credit: Money;
}

export interface TrialBalance {
  readonly rows: TrialBalanceRow[];
  readonly totalDebit: Money;
  readonly totalCredit: Money;
  /** True when total debits equal total credits (always, for a journal of balanced entries). */
  readonly balanced: boolean;
}

/**
 * Lists every account with a non-zero balance in its natural column (a debit-normal account with a
 * negative balance shows in the credit column), ordered by account code.
 */
export function trialBalance(entries: readonly Posted[], chart: ChartOfAccounts, code: string): TrialBalance {
  const bals = balances(entries, chart, code);
  const rows: TrialBalanceRow[] = [];
  let totalDebit = zero(code);
  let totalCredit = zero(code);
  for (const acc of chart.all()) {
    const b = bals.get(acc.code);
    if (!b || b.isZero()) continue;
    const debitSide = (normalSide(acc.kind) === 'debit') !== b.isNegative();
    const abs = b.isNegative() ? b.negate() : b;
    const row = {
      code: acc.code,
      name: acc.name,
      debit: debitSide ? abs : zero(code),
      credit: debitSide ? zero(code) : abs,
    };
    totalDebit = totalDebit.add(row.debit);
    totalCredit = totalCredit.add(row.credit);
    rows.push(row);
  }
  return { rows, totalDebit, totalCredit, balanced: totalDebit.equals(totalCredit) };
}
