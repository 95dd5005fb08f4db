import { invariant } from '../util/assert.ts';
import { type Account, parentCode } from './account.ts';

/** A chart of accounts: a tree of accounts keyed by code, where a child has its parent's kind. */
export class ChartOfAccounts {
  readonly #accounts = new Map<string, Account>();

  /** Adds an account. Its parent (by code) must exist and have the same kind. */
  add(acc: Account): this {
    invariant(!this.#accounts.has(acc.code), 'E_DUPLICATE_ACCOUNT', `account ${acc.code} already exists`);
    const parent = parentCode(acc.code);
    if (parent !== null) {
      const p = this.#accounts.get(parent);
      invariant(p, 'E_NO_PARENT', `account ${acc.code} has no parent ${parent}`);
      invariant(
        p.kind === acc.kind,
        'E_KIND_MISMATCH',
        `account ${acc.code} is ${acc.kind} but its parent ${parent} is ${p.kind}`,
      );
    }
    this.#accounts.set(acc.code, acc);
    return this;
  }

  has(code: string): boolean {
    return this.#accounts.has(code);
  }

  /** The account with `code`; throws E_NO_ACCOUNT if absent. */
  get(code: string): Account {
    const acc = this.#accounts.get(code);
    invariant(acc, 'E_NO_ACCOUNT', `no account ${code}`);
    return acc;
  }

  /** Direct children of `code`, sorted by code. */
  children(code: string): Account[] {
    return this.all().filter((a) => parentCode(a.code) === code);
  }

  /** Every account below `code` at any depth, sorted by code. */
  descendants(code: string): Account[] {
    return this.all().filter((a) => a.code.startsWith(`${code}.`));
  }

  /** Names from the top-level account down to `code`, e.g. ["Assets", "Bank", "Checking"]. */
  path(code: string): string[] {
    const names: string[] = [];
    for (let c: string | null = code; c !== null; c = parentCode(c)) names.unshift(this.get(c).name);
    return names;
  }

  /** Every account, sorted by code (numerically per segment). */
  all(): Account[] {
    return [...this.#accounts.values()].sort((a, b) => compareCodes(a.code, b.code));
  }
}

/** Orders codes segment by segment as numbers: "2" < "10", "1000" < "1000.2" < "1000.10". */
export function compareCodes(a: string, b: string): number {
  const as = a.split('.').map(Number);
  const bs = b.split('.').map(Number);
  for (let i = 0; i < Math.max(as.length, bs.length); i++) {
    const x = as[i];
    const y = bs[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x !== y) return x - y;
  }
  return 0;
}
