import { normalSide } from '../accounts/account.ts';
import type { ChartOfAccounts } from '../accounts/chart.ts';
import type { Posted } from '../journal/journal.ts';
import { type Money, zero } from '../money/amount.ts';
import { invariant } from '../util/assert.ts';

/**
 * Balance of every account touched by `entries`, signed by the account's normal side: an asset
 * debited 100 and credited 30 has balance 70; an income account credited 100 has balance 100.
 * Every account must exist in the chart and use `code` as its only currency.
 */
export function balances(
  entries: readonly Posted[],
  chart: ChartOfAccounts,
  code: string,
): Map<string, Money> {
  const out = new Map<string, Money>();
  for (const e of entries) {
    for (const line of e.lines) {
      const acc = chart.get(line.account);
      invariant(
        line.amount.currency.code === code,
        'E_LEDGER_CURRENCY',
        `entry #${e.seq} posts ${line.amount.currency.code} to a ${code} ledger`,
      );
      const signed = line.side === normalSide(acc.kind) ? line.amount : line.amount.negate();
      out.set(acc.code, (out.get(acc.code) ?? zero(code)).add(signed));
    }
  }
  return out;
}

/** Balance of `account` including all its descendants. */
export function rollup(
  chart: ChartOfAccounts,
  bals: Map<string, Money>,
  account: string,
  code: string,
): Money {
  let total = bals.get(account) ?? zero(code);
  for (const child of chart.descendants(account)) {
    const b = bals.get(child.code);
    if (b) total = total.add(b);
  }
  return total;
}
