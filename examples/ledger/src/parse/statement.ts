import { type Money, money } from '../money/amount.ts';
import { invariant } from '../util/assert.ts';
import { parseCsvObjects } from './csv.ts';

/** One line of a bank statement. */
export interface StatementLine {
  readonly date: string;
  readonly description: string;
  /** Positive for money in, negative for money out. */
  readonly amount: Money;
}

/** Which CSV column holds each field; `amount` may instead be split into `debit`/`credit` columns. */
export interface StatementColumns {
  date: string;
  description: string;
  amount?: string;
  moneyIn?: string;
  moneyOut?: string;
}

/** Turns "31/01/2026" or "2026-01-31" into "2026-01-31". */
export function normaliseDate(text: string): string {
  const iso = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (iso) return text;
  const dmy = /^(\d{1,2})\/(\d{1,2})\/(\d{4})$/.exec(text);
  invariant(dmy, 'E_STATEMENT', `unrecognised date "${text}"`);
  return `${dmy[3]}-${dmy[2]!.padStart(2, '0')}-${dmy[1]!.padStart(2, '0')}`;
}

/** Strips thousands separators: "1,234.50" -> "1234.50". */
function plain(text: string): string {
  return text.replaceAll(',', '').trim();
}

/** Parses a bank statement CSV in currency `code`. */
export function parseStatement(csv: string, code: string, cols: StatementColumns): StatementLine[] {
  invariant(
    cols.amount !== undefined || (cols.moneyIn !== undefined && cols.moneyOut !== undefined),
    'E_STATEMENT',
    'need an amount column or both money-in and money-out columns',
  );
  return parseCsvObjects(csv).map((row, n) => {
    const get = (col: string) => {
      const v = row[col];
      invariant(v !== undefined, 'E_STATEMENT', `row ${n + 1}: no column "${col}"`);
      return v;
    };
    let amount: Money;
    if (cols.amount !== undefined) amount = money(plain(get(cols.amount)), code);
    else {
      const inText = plain(get(cols.moneyIn!));
      const outText = plain(get(cols.moneyOut!));
      invariant(
        (inText === '') !== (outText === ''),
        'E_STATEMENT',
        `row ${n + 1}: exactly one of in/out must be set`,
      );
      amount = inText !== '' ? money(inText, code) : money(outText, code).negate();
    }
    return { date: normaliseDate(get(cols.date).trim()), description: get(cols.description).trim(), amount };
  });
}
