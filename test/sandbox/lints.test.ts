import { describe, expect, it } from 'vitest';
import { addedPatterns, LINTS } from '../../sandbox/lints.ts';

const names = (xs: { name: string }[]) => xs.map((x) => x.name);

describe('lints relative to the original', () => {
  it('counts only what the candidate adds', () => {
    const original = 'export const f = (x: any) => x; // eslint-disable-line\n';
    expect(addedPatterns(LINTS, original, original)).toEqual([]);
    const candidate = `${original}export const g = (y: any) => y as any;\n// @ts-ignore\nconsole.log(1);\n`;
    expect(addedPatterns(LINTS, original, candidate)).toEqual([
      { name: 'any', added: 2 },
      { name: 'ts-ignore', added: 1 },
      { name: 'console.log', added: 1 },
    ]);
  });

  it('flags stub bodies and lint-disable comments', () => {
    const added = addedPatterns(
      LINTS,
      '',
      "export function f(): void {}\nthrow new Error('not implemented');\n// biome-ignore lint: x\n",
    );
    expect(names(added)).toEqual(['lint-disable', 'stub']);
    expect(added.find((a) => a.name === 'stub')?.added).toBe(2);
  });
});

describe('the any lint counts any as TypeScript reads it', () => {
  it.each([
    ['a parameter annotation', 'export const f = (x: any) => x;', 1],
    ['a type alias', 'export type Loose = any;', 1],
    ['a type argument', 'export const r: Record<string, any> = {};', 1],
    ['an angle-bracket assertion', 'export const v = <any>1;', 1],
    ['an as-assertion', 'export const v = 1 as any;', 1],
    ['an array type', 'export const xs: any[] = [];', 1],
    ['a generic default and constraint', 'export function f<T extends any = any>(x: T): T { return x; }', 2],
    ['a return type', 'export function f(): any { return 1; }', 1],
    ['a nested function type', 'export type F = (cb: (e: any) => void) => Promise<any>;', 2],
    ['an interface member and index signature', 'export interface I { a: any; [k: string]: any }', 2],
    ['a cast without spaces', 'export const v=(1)as any;', 1],
    [
      'JSDoc types in JavaScript',
      '/** @param {any} x @returns {*} */\nexport function f(x) { return x; }',
      2,
    ],
    ['a line comment', 'export const a = 1; // any old value', 0],
    ['a block comment', '/* returns any */ export const a = 1;', 0],
    ['strings and templates', 'export const s = \'as any\' + `: any[]` + "<any>";', 0],
    ['an identifier named any', 'const any = 1; export const b = any + 1;', 0],
    ['a property named any', 'export const o = { any: 1 }; export const n = o.any;', 0],
    ['the word in a regular expression', 'export const re = /: any\\b/;', 0],
  ])('%s', (_name, code, expected) => {
    const added = addedPatterns(LINTS, '', code).find((a) => a.name === 'any')?.added ?? 0;
    expect(added).toBe(expected);
  });

  it('counts relative to the original, as the other lints do', () => {
    const original = 'export type Loose = any;\nexport const f = (x: Loose) => x;\n';
    expect(addedPatterns(LINTS, original, original.replace('(x: Loose)', '(x: any)'))).toEqual([
      { name: 'any', added: 1 },
    ]);
    expect(addedPatterns(LINTS, original, original.replace('= any', '= unknown'))).toEqual([]);
  });

  it('still counts in a candidate that does not parse', () => {
    expect(addedPatterns(LINTS, '', 'export const f = (x: any => {')[0]).toEqual({ name: 'any', added: 1 });
  });
});
