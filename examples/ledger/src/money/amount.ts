import { invariant } from '../util/assert.ts';
import { type Currency, currency } from './currency.ts';

/** An exact amount of one currency, held as an integer count of minor units (cents). */
export class Money {
  readonly minor: bigint;
  readonly currency: Currency;

  constructor(minor: bigint, cur: Currency) {
    this.minor = minor;
    this.currency = cur;
  }

  add(other: Money): Money {
    this.assertSameCurrency(other);
    return new Money(this.minor + other.minor, this.currency);
  }

  subtract(other: Money): Money {
    this.assertSameCurrency(other);
    return new Money(this.minor - other.minor, this.currency);
  }

  negate(): Money {
    return new Money(-this.minor, this.currency);
  }

  isZero(): boolean {
    return this.minor === 0n;
  }

  isNegative(): boolean {
    return this.minor < 0n;
  }

  equals(other: Money): boolean {
    return this.currency.code === other.currency.code && this.minor === other.minor;
  }

  /** -1, 0 or 1; throws for different currencies. */
  compare(other: Money): number {
    this.assertSameCurrency(other);
    return this.minor < other.minor ? -1 : this.minor > other.minor ? 1 : 0;
  }

  /** Multiplies by a decimal factor given as text (e.g. "0.075"), rounding half to even. */
  multiply(factor: string): Money {
    const { digits, scale } = parseDecimal(factor);
    return new Money(divideHalfEven(this.minor * digits, 10n ** BigInt(scale)), this.currency);
  }

  /**
   * Splits the amount by integer ratios without losing a cent: each share is rounded down and the
   * remainder goes one unit at a time to the shares with the largest fractional parts.
   */
  allocate(ratios: number[]): Money[] {
    invariant(ratios.length > 0, 'E_ALLOCATE', 'allocate needs at least one ratio');
    invariant(
      ratios.every((r) => Number.isInteger(r) && r >= 0),
      'E_ALLOCATE',
      'ratios must be non-negative integers',
    );
    const total = ratios.reduce((a, b) => a + b, 0);
    invariant(total > 0, 'E_ALLOCATE', 'ratios must not all be zero');
    const sign = this.minor < 0n ? -1n : 1n;
    const abs = this.minor * sign;
    const shares = ratios.map((r) => (abs * BigInt(r)) / BigInt(total));
    const remainders = ratios.map((r, i) => ({ i, rem: (abs * BigInt(r)) % BigInt(total) }));
    let left = abs - shares.reduce((a, b) => a + b, 0n);
    remainders.sort((a, b) => (b.rem > a.rem ? 1 : b.rem < a.rem ? -1 : a.i - b.i));
    for (const { i } of remainders) {
      if (left === 0n) break;
      shares[i] = (shares[i] ?? 0n) + 1n;
      left -= 1n;
    }
    return shares.map((s) => new Money(s * sign, this.currency));
  }

  /** Plain decimal text with the currency's digits, e.g. "-12.30". */
  toDecimal(): string {
    const units = this.currency.minorUnits;
    const negative = this.minor < 0n;
    const digits = (negative ? -this.minor : this.minor).toString().padStart(units + 1, '0');
    const whole = units === 0 ? digits : digits.slice(0, -units);
    const frac = units === 0 ? '' : `.${digits.slice(-units)}`;
    return `${negative ? '-' : ''}${whole}${frac}`;
  }

  toString(): string {
    return `${this.toDecimal()} ${this.currency.code}`;
  }

  private assertSameCurrency(other: Money): void {
    invariant(
      this.currency.code === other.currency.code,
      'E_CURRENCY_MISMATCH',
      `cannot combine ${this.currency.code} with ${other.currency.code}`,
    );
  }
}

function parseDecimal(text: string): { digits: bigint; scale: number } {
  const match = /^(-)?(\d+)(?:\.(\d+))?$/.exec(text.trim());
  invariant(match, 'E_AMOUNT', `not a decimal number: "${text}"`);
  const frac = match[3] ?? '';
  const digits = BigInt(`${match[2]}${frac}`);
  return { digits: match[1] ? -digits : digits, scale: frac.length };
}

/** Integer division rounding half to even ("banker's rounding"). */
export function divideHalfEven(numerator: bigint, denominator: bigint): bigint {
  invariant(denominator > 0n, 'E_DIVIDE', 'denominator must be positive');
  const sign = numerator < 0n ? -1n : 1n;
  const abs = numerator * sign;
  let q = abs / denominator;
  const r = abs % denominator;
  if (r * 2n > denominator || (r * 2n === denominator && q % 2n === 1n)) q += 1n;
  return q * sign;
}

/** Parses decimal text ("12.5", "-0.01") into Money; more digits than the currency has is an error. */
export function money(text: string, code: string): Money {
  const cur = currency(code);
  const { digits, scale } = parseDecimal(text);
  invariant(
    scale <= cur.minorUnits,
    'E_AMOUNT',
    `${text} has more than ${cur.minorUnits} decimals for ${code}`,
  );
  return new Money(digits * 10n ** BigInt(cur.minorUnits - scale), cur);
}

/** Zero of a currency. */
export function zero(code: string): Money {
  return new Money(0n, currency(code));
}

/** Sum of amounts of one currency; `code` gives the currency of an empty sum. */
export function sum(amounts: Money[], code: string): Money {
  return amounts.reduce((acc, m) => acc.add(m), zero(code));
}
