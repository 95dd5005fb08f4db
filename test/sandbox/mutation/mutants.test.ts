import { describe, expect, it } from 'vitest';
import { enumerateMutants, FILLER, type Mutant, mutantId } from '../../../sandbox/mutation/mutants.ts';
import { regexMutations } from '../../../sandbox/mutation/regex.ts';

/** `operator: original → replacement` lines of a snippet's mutants. */
const mutate = (src: string, file = 'x.ts'): string[] =>
  enumerateMutants(src, file).map((m) => `${m.operator}: ${m.original} → ${m.replacement}`);
const of = (src: string, operator: Mutant['operator'], file = 'x.ts'): string[] =>
  enumerateMutants(src, file)
    .filter((m) => m.operator === operator)
    .map((m) => `${m.original} → ${m.replacement}`);

describe('operators', () => {
  it('ArithmeticOperator swaps + - * / % and skips concatenation and neutral operands', () => {
    expect(of('f(a + b, a - b, a * b, a / b, a % b);', 'ArithmeticOperator')).toEqual([
      'a + b → a - b',
      'a - b → a + b',
      'a * b → a / b',
      'a / b → a * b',
      'a % b → a * b',
    ]);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: source text that holds a template literal
    expect(of('f("a" + b, b + `x${c}`, a + 0, a - 0, a * 1, a / 1, a ** 2);', 'ArithmeticOperator')).toEqual(
      [],
    );
  });

  it('Boundary and EqualityOperator: < ↔ <=, > ↔ >=, and the negated comparison', () => {
    expect(of('f(a < b, a >= b);', 'Boundary')).toEqual(['a < b → a <= b', 'a >= b → a > b']);
    expect(of('f(a < b, a <= b, a > b, a >= b);', 'EqualityOperator')).toEqual([
      'a < b → a >= b',
      'a <= b → a > b',
      'a > b → a <= b',
      'a >= b → a < b',
    ]);
    expect(of('f(a === b, a !== b, a == b, a != b);', 'EqualityOperator')).toEqual([
      'a === b → a !== b',
      'a !== b → a === b',
      'a == b → a != b',
      'a != b → a == b',
    ]);
  });

  it('LogicalOperator, UnaryOperator, UpdateOperator, AssignmentOperator', () => {
    expect(of('f(a && b, a || b, a ?? b);', 'LogicalOperator')).toEqual([
      'a && b → a || b',
      'a || b → a && b',
      'a ?? b → a && b',
    ]);
    // `-x` → `x`, not `+x` (unary plus throws on a bigint); `-0` is left alone.
    expect(of('f(-x, +x, ~x, -0);', 'UnaryOperator')).toEqual(['-x → x', '+x → -x', '~x → x']);
    expect(of('f(i++, i--, ++i, --i);', 'UpdateOperator')).toEqual([
      'i++ → i--',
      'i-- → i++',
      '++i → --i',
      '--i → ++i',
    ]);
    expect(
      of('a += 1; a -= 1; a *= 2; a /= 2; a %= 2; a ??= 1; a ||= 1; a &&= 1; a = 1;', 'AssignmentOperator'),
    ).toEqual([
      'a += 1 → a -= 1',
      'a -= 1 → a += 1',
      'a *= 2 → a /= 2',
      'a /= 2 → a *= 2',
      'a %= 2 → a *= 2',
      'a ??= 1 → a &&= 1',
      'a ||= 1 → a &&= 1',
      'a &&= 1 → a ||= 1',
    ]);
  });

  it('BooleanLiteral flips literals and drops a negation (once for !!x)', () => {
    expect(of('f(true, false, !x, !!y);', 'BooleanLiteral')).toEqual([
      'true → false',
      'false → true',
      '!x → x',
      '!!y → !y',
    ]);
  });

  it('StringLiteral empties strings and templates, fills empty ones, keeps the quote style', () => {
    expect(of(`f('a', "b", '', \`c\${d}\`, \`\`);`, 'StringLiteral')).toEqual([
      "'a' → ''",
      '"b" → ""',
      `'' → '${FILLER}'`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: source text that holds a template literal
      '`c${d}` → ``',
      `\`\` → \`${FILLER}\``,
    ]);
  });

  it('ArrayDeclaration, ObjectLiteral, OptionalChaining, MethodExpression', () => {
    expect(of('f([1, 2], [], new Array(3), Array(4), new Array());', 'ArrayDeclaration')).toEqual([
      '[1, 2] → []',
      `[] → ['${FILLER}']`,
      'new Array(3) → new Array()',
      'Array(4) → Array()',
    ]);
    expect(of('f({ a: 1 }, {});', 'ObjectLiteral')).toEqual(['{ a: 1 } → {}']);
    expect(of('f(a?.b.c, a?.[0], a?.(), a?.b?.c);', 'OptionalChaining')).toEqual([
      'a?.b.c → a.b.c',
      'a?.[0] → a[0]',
      'a?.() → a()',
      'a?.b?.c → a.b?.c',
      'a?.b?.c → a?.b.c',
    ]);
    expect(
      of(
        'f(s.startsWith(x), s.trim(), xs.filter(g), xs.some(g), Math.min(a, b), s.notInTable());',
        'MethodExpression',
      ),
    ).toEqual([
      's.startsWith(x) → s.endsWith(x)',
      's.trim() → s',
      'xs.filter(g) → xs',
      'xs.some(g) → xs.every(g)',
      'Math.min(a, b) → Math.max(a, b)',
    ]);
  });

  it('ConditionalExpression: if and ternary tests become true and false, loop tests only false', () => {
    expect(
      of(
        'if (a) f(); x = b ? 1 : 2; while (c) g(); do h(); while (d); for (;e;) k(); for (;;) break; if (true) f();',
        'ConditionalExpression',
      ),
    ).toEqual(['a → false', 'a → true', 'b → false', 'b → true', 'c → false', 'd → false', 'e → false']);
  });

  it('ReturnValue, ArrowFunction and StatementRemoval', () => {
    expect(
      of(
        'function f() { if (a) return; if (b) return null; if (c) return undefined; return g(); }',
        'ReturnValue',
      ),
    ).toEqual(['g() → undefined']);
    expect(
      of('const f = () => a + 1; const g = () => undefined; const h = () => { return 1; };', 'ArrowFunction'),
    ).toEqual(['a + 1 → undefined']);
    expect(
      of(
        'class A extends B { constructor() { super(); this.x = 1; } } f(); x = 1; i++; delete o.p; await g(); a + b; "use strict";',
        'StatementRemoval',
      ),
    ).toEqual([
      'this.x = 1 → void 0',
      'f() → void 0',
      'x = 1 → void 0',
      'i++ → void 0',
      'delete o.p → void 0',
      'await g() → void 0',
    ]);
  });

  it('BlockStatement empties function bodies and blocks, unless another mutant already does it', () => {
    const ms = enumerateMutants(
      [
        'function f(a) { "use strict"; g(a); return a; }',
        'function one() { return 1; }',
        'if (x) { g(); h(); } else { k(); }',
        'class A extends B { constructor() { super(); g(); } }',
        'class C { constructor() { g(); h(); } }',
      ].join('\n'),
      'x.ts',
    ).filter((m) => m.operator === 'BlockStatement');
    expect(ms.map((m) => [m.kind, m.original, m.fn])).toEqual([
      ['function-body', 'g(a); return a;', 'f'], // after the directive
      ['block', 'g(); h();', '<module>'],
      ['function-body', 'g(); h();', 'C.constructor'],
    ]);
  });

  it('Regex: anchors, classes, predefined classes, quantifiers, lookarounds; every mutant compiles', () => {
    expect(regexMutations('/^a[bc]\\d+$/u')).toEqual([
      '/a[bc]\\d+$/u',
      '/^a[^bc]\\d+$/u',
      '/^a[bc]\\D+$/u',
      '/^a[bc]\\d$/u',
      '/^a[bc]\\d+/u',
    ]);
    expect(regexMutations('/(?=x)[^\\s-]*?/')).toEqual([
      '/(?!x)[^\\s-]*?/',
      '/(?=x)[\\s-]*?/',
      '/(?=x)[^\\S-]*?/',
      '/(?=x)[^\\s-]/',
    ]);
    expect(regexMutations('/^/')).toEqual(['/(?:)/']); // never `//`, a comment
    for (const m of regexMutations('/^(?<y>\\d{4})-(\\d{2})\\b[\\w.]+?$/gi'))
      expect(() => new RegExp(m.slice(1, m.lastIndexOf('/')), m.slice(m.lastIndexOf('/') + 1))).not.toThrow();
    expect(of('const r = /a+/;', 'Regex')).toEqual(['/a+/ → /a/']);
  });
});

describe('what is never mutated', () => {
  it('types, declare, enums, imports/exports, directives, keys, module specifiers and as-const operands', () => {
    const src = [
      '"use strict";',
      'import x from "mod";',
      'export { y as "z" } from "m";',
      'export * from "n";',
      'type T = "a" | 1;',
      'interface I { a: "b"; m(): void }',
      'declare const d: number;',
      'declare function g(x: string): boolean;',
      'declare module "q" { const v = 1 + 2; }',
      'enum E { A = 1 + 2, B = "s" }',
      'const enum F { C = 4 * 2 }',
      'function over(a: string): string;',
      'abstract class K { abstract m(): number; "key" = 1; static "s"(): void {} }',
      'const o = { "k": g, [`c`]: h, k2: i };',
      'const fs = require("fs"); const lazy = import("p");',
      'const tuple = [a, b] as const;',
      'let v: Array<"x"> = <any>w;',
      'const q = o satisfies Record<string, number>;',
    ].join('\n');
    expect(mutate(src)).toEqual(['ObjectLiteral: { "k": g, [`c`]: h, k2: i } → {}']);
    // Inside a const assertion the elements still run (and keep their literal types): only the operand stays.
    expect(of('const t = ["a"] as const;', 'StringLiteral')).toEqual(['"a" → ""']);
    expect(of('const t = ["a"] as const;', 'ArrayDeclaration')).toEqual([]);
  });

  it('assignment targets, callees, delete operands and the inside of an optional chain', () => {
    expect(
      mutate('[a, b] = c; ({ d } = e); for ([f, g] of h); o.m(); delete o["k"]; a?.b.c.d;', 'x.js'),
    ).toEqual([
      'StatementRemoval: [a, b] = c → void 0',
      'StatementRemoval: ({ d } = e) → void 0',
      'StatementRemoval: o.m() → void 0',
      'StatementRemoval: delete o["k"] → void 0',
      'StringLiteral: "k" → ""', // the key deleted, not the operand: still a valid program
      'OptionalChaining: a?.b.c.d → a.b.c.d',
    ]);
  });

  it('declaration files and JSX attribute strings', () => {
    expect(enumerateMutants('export declare function f(): "x";\nexport const a = 1 + 2;', 'x.d.ts')).toEqual(
      [],
    );
    expect(of('const e = <a href="x" title={"y"}>{"z"}</a>;', 'StringLiteral', 'x.tsx')).toEqual([
      '"y" → ""',
      '"z" → ""',
    ]);
  });
});

describe('identity', () => {
  const src = 'export function f(a, b) {\n  return a < b ? a + 1 : b;\n}\n';

  it('ids are stable and derived from file, operator, span and replacement', () => {
    const a = enumerateMutants(src, 'src/f.js');
    expect(enumerateMutants(src, 'src/f.js')).toEqual(a);
    expect(new Set(a.map((m) => m.id)).size).toBe(a.length);
    for (const m of a) {
      expect(m.id).toBe(mutantId('src/f.js', m.operator, m.start, m.end, m.replacement));
      expect(src.slice(m.start, m.end)).toBe(m.original);
    }
    // Another file, or the same text elsewhere in the file, gives other ids.
    expect(enumerateMutants(src, 'src/g.js').map((m) => m.id)).not.toContain(a[0]!.id);
    expect(enumerateMutants(`\n${src}`, 'src/f.js').map((m) => m.id)).not.toContain(a[0]!.id);
  });

  it('positions and enclosing functions', () => {
    const ms = enumerateMutants(
      'const top = 1 + 2;\nclass A {\n  m() {\n    return [1].map((x) => x * 2);\n  }\n}\nfunction outer() {\n  function inner() { return a - b; }\n}\nconst arrow = () => c + d;\nexport default function () { return e / f; }\n',
      'x.ts',
    );
    const at = (orig: string) => ms.find((m) => m.original === orig && m.kind === 'expression')!;
    expect(at('1 + 2')).toMatchObject({ line: 1, column: 13, fn: '<module>' });
    expect(at('x * 2')).toMatchObject({ line: 4, fn: 'A.m' }); // a callback belongs to its named function
    expect(at('a - b')).toMatchObject({ line: 8, fn: 'outer/inner' });
    expect(at('c + d')).toMatchObject({ fn: 'arrow' });
    expect(at('e / f')).toMatchObject({ fn: 'default' });
  });

  it('refuses files that are not JavaScript or TypeScript', () => {
    expect(() => enumerateMutants('x', 'a.json')).toThrow(/not a JavaScript or TypeScript source/);
  });
});
