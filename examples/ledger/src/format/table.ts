/** One column of a text table. */
export interface Column<Row> {
  readonly title: string;
  readonly value: (row: Row) => string;
  /** Numbers read best right-aligned. */
  readonly align?: 'left' | 'right';
}

/** Groups the integer part of a decimal string in thousands: "-1234567.5" -> "-1,234,567.5". */
export function groupThousands(decimal: string, separator = ','): string {
  const match = /^(-?)(\d+)(\.\d+)?$/.exec(decimal);
  if (!match) return decimal;
  const [, sign = '', whole = '', frac = ''] = match;
  return `${sign}${whole.replace(/\B(?=(\d{3})+(?!\d))/g, separator)}${frac}`;
}

/** Width of a string in columns, counting each code point once. */
function width(text: string): number {
  return [...text].length;
}

function pad(text: string, size: number, align: 'left' | 'right'): string {
  const fill = ' '.repeat(Math.max(0, size - width(text)));
  return align === 'right' ? fill + text : text + fill;
}

/**
 * Renders rows as a plain-text table: a header, a rule of dashes, one line per row, and optionally a
 * footer row under a second rule. Columns are separated by two spaces; no line has trailing spaces.
 */
export function renderTable<Row>(
  rows: readonly Row[],
  columns: readonly Column<Row>[],
  footer?: string[],
): string {
  const cells = rows.map((r) => columns.map((c) => c.value(r)));
  const all = [columns.map((c) => c.title), ...cells, ...(footer ? [footer] : [])];
  const widths = columns.map((_, i) => Math.max(...all.map((line) => width(line[i] ?? ''))));
  const line = (values: string[]) =>
    columns
      .map((c, i) => pad(values[i] ?? '', widths[i] ?? 0, c.align ?? 'left'))
      .join('  ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  const out = [line(all[0] ?? []), rule, ...cells.map(line)];
  if (footer) out.push(rule, line(footer));
  return out.join('\n');
}
