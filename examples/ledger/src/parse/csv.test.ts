import { describe, expect, it } from 'vitest';
import { parseCsv, parseCsvObjects } from './csv.ts';

describe('parseCsv', () => {
  it('splits records and fields', () => {
    expect(parseCsv('a,b,c\n1,2,3\n')).toEqual([
      ['a', 'b', 'c'],
      ['1', '2', '3'],
    ]);
    expect(parseCsv('a;b\r\n1;2', ';')).toEqual([
      ['a', 'b'],
      ['1', '2'],
    ]);
  });

  it('keeps empty fields', () => {
    expect(parseCsv(',x,\n')).toEqual([['', 'x', '']]);
    expect(parseCsv('a\n\nb\n')).toEqual([['a'], [''], ['b']]);
  });

  it('handles quoted delimiters, newlines and doubled quotes', () => {
    expect(parseCsv('"a,b","say ""hi""","line1\nline2"\n')).toEqual([['a,b', 'say "hi"', 'line1\nline2']]);
    expect(parseCsv('""')).toEqual([['']]);
  });

  it('reports unterminated quotes and stray quotes with their line', () => {
    expect(() => parseCsv('a,b\n1,"open\n2,3\n')).toThrow(/line 2: unterminated quoted field/);
    expect(() => parseCsv('a,b\nx"y,1\n')).toThrow(/line 2: quote inside an unquoted field/);
  });

  it('rejects bad delimiters', () => {
    expect(() => parseCsv('a', '"')).toThrow(/delimiter/);
    expect(() => parseCsv('a', ',,')).toThrow(/delimiter/);
  });
});

describe('parseCsvObjects', () => {
  it('maps rows by header', () => {
    expect(parseCsvObjects('name,qty\nnails,10\n"screws, wood",5\n')).toEqual([
      { name: 'nails', qty: '10' },
      { name: 'screws, wood', qty: '5' },
    ]);
    expect(parseCsvObjects('')).toEqual([]);
  });

  it('rejects ragged rows and duplicate columns', () => {
    expect(() => parseCsvObjects('a,b\n1\n')).toThrow(/record 2: expected 2 fields, got 1/);
    expect(() => parseCsvObjects('a,a\n1,2\n')).toThrow(/duplicate column/);
  });
});
