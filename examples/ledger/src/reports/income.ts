import type { ChartOfAccounts } from '../accounts/chart.ts';
import type { Journal } from '../journal/journal.ts';
import { balances } from '../ledger/balances.ts';
import { type Money, sum } from '../money/amount.ts';

export interface IncomeStatement {
  readonly from: string;
  readonly to: string;
  readonly income: { code: string; name: string; amount: Money }[];
  readonly expenses: { code: string; name: string; amount: Money }[];
  readonly totalIncome: Money;
  readonly totalExpenses: Money;
  /** Income minus expenses: negative for a loss. */
  readonly net: Money;
}

/** Income and expense accounts for entries dated within [from, to]. */
export function incomeStatement(
  journal: Journal,
  chart: ChartOfAccounts,
  from: string,
  to: string,
  code: string,
): IncomeStatement {
  const bals = balances(journal.between(from, to), chart, code);
  const pick = (kind: 'income' | 'expense') =>
    chart
      .all()
      .filter((a) => a.kind === kind && bals.has(a.code))
      .map((a) => ({ code: a.code, name: a.name, amount: bals.get(a.code)! }));
  const income = pick('income');
  const expenses = pick('expense');
  const totalIncome = sum(
    income.map((r) => r.amount),
    code,
  );
  const totalExpenses = sum(
    expenses.map((r) => r.amount),
    code,
  );
  return { from, to, income, expenses, totalIncome, totalExpenses, net: totalIncome.subtract(totalExpenses) };
}
