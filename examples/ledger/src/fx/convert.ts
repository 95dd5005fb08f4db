import { divideHalfEven, Money } from '../money/amount.ts';
import { currency } from '../money/currency.ts';
import type { RateTable } from './rates.ts';

/**
 * Converts `amount` into currency `to` with exact rational arithmetic, rounding once, half to even,
 * to the target currency's minor units.
 */
export function convert(amount: Money, to: string, table: RateTable): Money {
  const target = currency(to);
  if (amount.currency.code === to) return amount;
  const [num, den] = table.rate(amount.currency.code, to);
  const scaleUp = 10n ** BigInt(target.minorUnits);
  const scaleDown = 10n ** BigInt(amount.currency.minorUnits);
  return new Money(divideHalfEven(amount.minor * num * scaleUp, den * scaleDown), target);
}

/** Converts every amount to `to` and adds them up. */
export function convertSum(amounts: Money[], to: string, table: RateTable): Money {
  return amounts.reduce((acc, m) => acc.add(convert(m, to, table)), new Money(0n, currency(to)));
}
