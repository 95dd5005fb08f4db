import { describe, expect, it } from 'vitest';
import { groupThousands, renderTable } from './table.ts';

describe('groupThousands', () => {
  it('groups the integer part only', () => {
    expect(groupThousands('1234567.891')).toBe('1,234,567.891');
    expect(groupThousands('-1000')).toBe('-1,000');
    expect(groupThousands('999')).toBe('999');
    expect(groupThousands('1234', "'")).toBe("1'234");
  });

  it('leaves non-numbers alone', () => {
    expect(groupThousands('n/a')).toBe('n/a');
    expect(groupThousands('')).toBe('');
  });
});

describe('renderTable', () => {
  const rows = [
    { name: 'Cash', amount: '1,250.00' },
    { name: 'Accounts receivable', amount: '80.00' },
  ];
  const columns = [
    { title: 'Account', value: (r: (typeof rows)[number]) => r.name },
    { title: 'Balance', value: (r: (typeof rows)[number]) => r.amount, align: 'right' as const },
  ];

  it('pads columns to their widest cell and right-aligns numbers', () => {
    expect(renderTable(rows, columns)).toBe(
      [
        'Account               Balance',
        '-------------------  --------',
        'Cash                 1,250.00',
        'Accounts receivable     80.00',
      ].join('\n'),
    );
  });

  it('adds a footer under a rule and never leaves trailing spaces', () => {
    const out = renderTable(rows, [columns[1]!, columns[0]!], ['1,330.00', 'Total']);
    const lines = out.split('\n');
    expect(lines).toHaveLength(6);
    expect(lines[4]).toBe(lines[1]);
    expect(lines[5]).toBe('1,330.00  Total');
    expect(lines.every((l) => l === l.trimEnd())).toBe(true);
  });

  it('counts code points, not UTF-16 units', () => {
    const out = renderTable([{ n: '€€' }, { n: 'abc' }], [{ title: 'x', value: (r: { n: string }) => r.n }]);
    expect(out.split('\n')[1]).toBe('---');
  });
});
