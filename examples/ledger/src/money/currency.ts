import { invariant } from '../util/assert.ts';

/** An ISO 4217 currency and the number of digits after its decimal point. */
export interface Currency {
  readonly code: string;
  readonly minorUnits: number;
}

const TABLE: Record<string, number> = { USD: 2, EUR: 2, GBP: 2, CHF: 2, JPY: 0, KWD: 3 };

/** True when `code` is a currency this ledger knows. */
export function isCurrencyCode(code: string): boolean {
  return Object.hasOwn(TABLE, code);
}

/** Looks a currency up by its code; throws E_CURRENCY for an unknown code. */
export function currency(code: string): Currency {
  const minorUnits = TABLE[code];
  invariant(minorUnits !== undefined, 'E_CURRENCY', `unknown currency ${code}`);
  return { code, minorUnits };
}

/** Every known currency code, sorted. */
export function currencyCodes(): string[] {
  return Object.keys(TABLE).sort();
}
