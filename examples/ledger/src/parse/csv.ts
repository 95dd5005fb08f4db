import { invariant } from '../util/assert.ts';

/**
 * Parses CSV text (RFC 4180): fields separated by `delimiter`, records by LF or CRLF, fields in double
 * quotes may hold delimiters, newlines and doubled quotes. A trailing newline adds no empty record.
 */
export function parseCsv(text: string, delimiter = ','): string[][] {
  invariant(
    delimiter.length === 1 && delimiter !== '"',
    'E_CSV',
    'delimiter must be one non-quote character',
  );
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  let line = 1;
  let quoteLine = 0;
  let started = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    started = true;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else {
        if (ch === '\n') line++;
        field += ch;
      }
    } else if (ch === '"') {
      invariant(field === '', 'E_CSV', `line ${line}: quote inside an unquoted field`);
      quoted = true;
      quoteLine = line;
    } else if (ch === delimiter) {
      record.push(field);
      field = '';
    } else if (ch === '\n' || (ch === '\r' && text[i + 1] === '\n')) {
      if (ch === '\r') i++;
      record.push(field);
      records.push(record);
      record = [];
      field = '';
      line++;
      started = false;
    } else {
      field += ch;
    }
  }
  invariant(!quoted, 'E_CSV', `line ${quoteLine}: unterminated quoted field`);
  if (started) {
    record.push(field);
    records.push(record);
  }
  return records;
}

/** Parses CSV with a header row into objects keyed by header name. */
export function parseCsvObjects(text: string, delimiter = ','): Record<string, string>[] {
  const [header, ...rows] = parseCsv(text, delimiter);
  if (!header) return [];
  invariant(new Set(header).size === header.length, 'E_CSV', 'duplicate column in header');
  return rows.map((row, n) => {
    invariant(
      row.length === header.length,
      'E_CSV',
      `record ${n + 2}: expected ${header.length} fields, got ${row.length}`,
    );
    return Object.fromEntries(header.map((h, i) => [h, row[i] ?? '']));
  });
}
