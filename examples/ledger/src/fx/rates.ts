import { invariant } from '../util/assert.ts';

/**
 * Exchange rates as exact decimal text, quoted against one base currency. Any pair is derived from
 * the base: the rate from A to B is rate(base->B) / rate(base->A).
 */
export class RateTable {
  readonly base: string;
  readonly #rates = new Map<string, string>();

  constructor(base: string) {
    this.base = base;
  }

  /** Sets how many units of `code` one unit of the base buys, e.g. set("EUR", "0.92"). */
  set(code: string, rate: string): this {
    invariant(code !== this.base, 'E_RATE', `the base ${this.base} has rate 1 by definition`);
    invariant(
      /^\d+(\.\d+)?$/.test(rate) && /[1-9]/.test(rate),
      'E_RATE',
      `invalid rate "${rate}" for ${code}`,
    );
    this.#rates.set(code, rate);
    return this;
  }

  /** Rate base -> code as a fraction [numerator, denominator] of bigints. */
  fromBase(code: string): [bigint, bigint] {
    if (code === this.base) return [1n, 1n];
    const rate = this.#rates.get(code);
    invariant(rate, 'E_NO_RATE', `no rate for ${code} against ${this.base}`);
    const [whole, frac = ''] = rate.split('.');
    return [BigInt(`${whole}${frac}`), 10n ** BigInt(frac.length)];
  }

  /** Rate from -> to as an exact fraction [numerator, denominator]. */
  rate(from: string, to: string): [bigint, bigint] {
    const [fn, fd] = this.fromBase(from);
    const [tn, td] = this.fromBase(to);
    return [tn * fd, td * fn];
  }

  /** Currencies with a rate, base included, sorted. */
  codes(): string[] {
    return [this.base, ...this.#rates.keys()].sort();
  }
}
