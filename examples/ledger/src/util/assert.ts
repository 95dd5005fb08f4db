/** An error raised by the ledger for invalid input or a broken invariant. */
export class LedgerError extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = 'LedgerError';
    this.code = code;
  }
}

/** Throws a LedgerError with `code` unless `condition` holds. */
export function invariant(condition: unknown, code: string, message: string): asserts condition {
  if (!condition) throw new LedgerError(code, message);
}
