import { invariant } from '../util/assert.ts';

/** The five kinds of account in double-entry bookkeeping. */
export type AccountKind = 'asset' | 'liability' | 'equity' | 'income' | 'expense';

/** Which side of an entry increases an account. */
export type Side = 'debit' | 'credit';

export interface Account {
  /** Numeric code, e.g. "1000" or "1000.10" for a sub-account. */
  readonly code: string;
  readonly name: string;
  readonly kind: AccountKind;
}

const KINDS: readonly AccountKind[] = ['asset', 'liability', 'equity', 'income', 'expense'];

/** Assets and expenses grow with debits; liabilities, equity and income with credits. */
export function normalSide(kind: AccountKind): Side {
  return kind === 'asset' || kind === 'expense' ? 'debit' : 'credit';
}

/** Validates and builds an account. Codes are dot-separated groups of digits. */
export function account(code: string, name: string, kind: string): Account {
  invariant(/^\d+(\.\d+)*$/.test(code), 'E_ACCOUNT_CODE', `invalid account code "${code}"`);
  invariant(name.trim() !== '', 'E_ACCOUNT_NAME', `account ${code} needs a name`);
  invariant((KINDS as readonly string[]).includes(kind), 'E_ACCOUNT_KIND', `unknown account kind "${kind}"`);
  return { code, name: name.trim(), kind: kind as AccountKind };
}

/** The code of the parent account ("1000.10.2" -> "1000.10"), or null for a top-level account. */
export function parentCode(code: string): string | null {
  const at = code.lastIndexOf('.');
  return at === -1 ? null : code.slice(0, at);
}
