// The type-check service's verdict must equal a fresh `tsc --noEmit -p tsconfig.json` on the same
// candidate: pass/fail, and the same error codes at the same locations. Each candidate below runs through
// both (the service confined by bwrap, tsc in a fresh box) and the two are compared (verdict, and each
// diagnostic's location, code and first message line); each also states
// what it must produce, so the comparison cannot pass vacuously.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import { createTypecheckService, type TypecheckService } from '../../sandbox/typecheck/client.ts';
import { prepareFixtures, REPO_ROOT, VITEST_WS } from './fixtures.ts';
import { edit, freshTsc, original, serviceKeys } from './typecheck-helpers.ts';

const LEDGER = join(REPO_ROOT, 'examples', 'ledger');
const PROJECT = ['--noEmit', '-p', 'tsconfig.json'];
/** The ledger under stricter command-line flags (they override the tsconfig, as with tsc). */
const STRICT = [...PROJECT, '--noUnusedLocals', '--noUnusedParameters'];

interface Candidate {
  name: string;
  ws: 'ledger' | 'strict' | 'vitest';
  target: string;
  /** The candidate's text from the original's. */
  make: (original: string) => string;
  expect: 'passed' | 'failed';
  /** Error codes that must be reported. */
  codes?: number[];
  /** Some diagnostic must be in another file than the target (an error only an importer shows). */
  elsewhere?: boolean;
  /** The service must have checked every file (the overlay can affect the global scope). */
  all?: boolean;
  /** The service must have checked the target alone (its declaration shape is the reference's). */
  alone?: boolean;
}

const WORKSPACES = {
  ledger: { dir: LEDGER, args: PROJECT },
  strict: { dir: LEDGER, args: STRICT },
  vitest: { dir: VITEST_WS, args: PROJECT },
};

const CONVERT = 'src/fx/convert.ts';
const CURRENCY = 'src/money/currency.ts';
const ASSERT = 'src/util/assert.ts';

const corpus: Candidate[] = [
  {
    name: 'a correct rewrite with other formatting and names',
    ws: 'ledger',
    target: CONVERT,
    make: (o) =>
      edit(o, 'const target = currency(to);', 'const  goal   =  currency( to ) ;\n\n')
        .replace(/\btarget\b/g, 'goal')
        .replace(/\n {2}/g, '\n    '),
    expect: 'passed',
    alone: true,
  },
  {
    name: 'a type error in the target',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => edit(o, 'const scaleUp = 10n', 'const scaleUp: number = 10n'),
    expect: 'failed',
    codes: [2322],
  },
  {
    name: 'a changed return type only its importers see',
    ws: 'ledger',
    target: CURRENCY,
    make: (o) =>
      edit(
        edit(
          o,
          'export function currency(code: string): Currency',
          'export function currency(code: string): { code: string }',
        ),
        '{ code, minorUnits }',
        '{ code }',
      ),
    expect: 'failed',
    codes: [2339],
    elsewhere: true,
  },
  {
    name: 'a wrong signature re-exported through index.ts (callers and tests break)',
    ws: 'ledger',
    target: ASSERT,
    make: (o) =>
      edit(
        edit(
          o,
          'invariant(condition: unknown, code: string, message: string)',
          'invariant(condition: unknown, message: string)',
        ),
        'new LedgerError(code, message)',
        "new LedgerError('E', message)",
      ),
    expect: 'failed',
    codes: [2554],
    elsewhere: true,
  },
  {
    name: 'a removed export a test imports',
    ws: 'ledger',
    target: CURRENCY,
    make: (o) =>
      edit(
        o,
        /\/\*\* Every known currency code, sorted\. \*\/\nexport function currencyCodes[\s\S]*?\n}\n/,
        '',
      ),
    expect: 'failed',
    codes: [2724],
    elsewhere: true,
  },
  {
    name: 'an inferred return type that changes what importers see',
    ws: 'ledger',
    target: CURRENCY,
    make: (o) =>
      edit(
        edit(
          o,
          'export function currency(code: string): Currency {',
          'export function currency(code: string) {',
        ),
        'return { code, minorUnits };',
        'return { code, units: minorUnits };',
      ),
    expect: 'failed',
    elsewhere: true,
  },
  {
    name: 'a body rewritten with the same declaration shape (only the target is checked)',
    ws: 'ledger',
    target: CURRENCY,
    make: (o) =>
      edit(
        o,
        'return Object.keys(TABLE).sort();',
        'const codes = Object.keys(TABLE);\n  codes.sort();\n  return codes;',
      ),
    expect: 'passed',
    alone: true,
  },
  {
    name: 'a global augmentation that breaks another file',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => `${o}\ndeclare global {\n  interface String {\n    trim(): number;\n  }\n}\n`,
    expect: 'failed',
    elsewhere: true,
    all: true,
  },
  {
    name: 'a harmless global augmentation (checks everything, passes)',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => `${o}\ndeclare global {\n  interface Array<T> {\n    vtnodeMarker?: T;\n  }\n}\n`,
    expect: 'passed',
    all: true,
  },
  {
    name: 'a module augmentation (declare module) that breaks the module it augments',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => `${o}\ndeclare module './rates.ts' {\n  interface RateTable {\n    base: number;\n  }\n}\n`,
    expect: 'failed',
    all: true,
  },
  {
    name: 'a syntax error (semantic errors elsewhere are not reported, as with tsc)',
    ws: 'ledger',
    target: CURRENCY,
    make: (o) =>
      edit(
        edit(o, 'export function currencyCodes', 'function currencyCodes'),
        'return { code, minorUnits };',
        'return { code, minorUnits ;',
      ),
    expect: 'failed',
    codes: [1005],
  },
  {
    name: 'an unterminated template literal',
    ws: 'vitest',
    target: 'src/strings.ts',
    make: (o) => `${o}\nexport const broken = \`never closed\n`,
    expect: 'failed',
    codes: [1160],
  },
  {
    name: 'an unused local under --noUnusedLocals',
    ws: 'strict',
    target: CONVERT,
    make: (o) => edit(o, 'const target = currency(to);', 'const target = currency(to);\n  const unused = 1;'),
    expect: 'failed',
    codes: [6133],
  },
  {
    name: 'the same unused local under the tsconfig alone',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => edit(o, 'const target = currency(to);', 'const target = currency(to);\n  const unused = 1;'),
    expect: 'passed',
  },
  {
    name: 'an unused parameter under --noUnusedParameters',
    ws: 'strict',
    target: CONVERT,
    make: (o) =>
      edit(
        o,
        'convertSum(amounts: Money[], to: string, table: RateTable)',
        'convertSum(amounts: Money[], to: string, table: RateTable, extra?: number)',
      ),
    expect: 'failed',
    codes: [6133],
  },
  {
    name: 'a relative import without its extension (NodeNext)',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => edit(o, "from '../money/currency.ts'", "from '../money/currency'"),
    expect: 'failed',
    codes: [2835],
  },
  {
    name: 'a .js import of a .ts file (NodeNext maps it)',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => edit(o, "from '../money/currency.ts'", "from '../money/currency.js'"),
    expect: 'passed',
  },
  {
    name: 'an import with a wrong extension',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => edit(o, "from '../money/currency.ts'", "from '../money/currency.mjs'"),
    expect: 'failed',
    codes: [2307],
  },
  {
    name: 'an import through the tsconfig paths alias',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => edit(o, "from '../money/currency.ts'", "from '@ledger/money/currency.ts'"),
    expect: 'passed',
  },
  {
    name: 'a new import of a package the program did not hold',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => `import type { Bench } from 'tinybench';\nexport type Unused = Bench;\n${o}`,
    expect: 'passed',
  },
  {
    name: 'an unused @ts-expect-error',
    ws: 'ledger',
    target: CONVERT,
    make: (o) =>
      edit(o, 'const target = currency(to);', '// @ts-expect-error\n  const target = currency(to);'),
    expect: 'failed',
    codes: [2578],
  },
  {
    name: 'an implicit any',
    ws: 'ledger',
    target: CONVERT,
    make: (o) => `${o}\nexport function loose(x) {\n  return x;\n}\n`,
    expect: 'failed',
    codes: [7006],
  },
  {
    // Under NodeNext in a "type": "module" package every .ts file is a module, exports or not.
    name: 'a file that stops exporting: importers find the names declared locally',
    ws: 'ledger',
    target: ASSERT,
    make: (o) => o.replace(/export /g, ''),
    expect: 'failed',
    codes: [2459],
    elsewhere: true,
  },
  {
    name: 'a barrel that drops a re-export',
    ws: 'ledger',
    target: 'src/index.ts',
    make: (o) => edit(o, "export * from './money/amount.ts';\n", ''),
    expect: 'failed',
    codes: [2305],
    elsewhere: true,
  },
  {
    name: 'a circular import with a type use',
    ws: 'ledger',
    target: ASSERT,
    make: (o) =>
      `import type { Money } from '../money/amount.ts';\nexport type Amountish = Money | bigint;\n${o}`,
    expect: 'passed',
  },
  {
    name: 'a correct generic class with another style',
    ws: 'vitest',
    target: 'src/stack.ts',
    make: (o) =>
      edit(
        o,
        'pop(): T | undefined {\n    return this.#items.pop();\n  }',
        'pop(): T | undefined {\n    const top = this.#items.pop();\n    return top;\n  }',
      ),
    expect: 'passed',
  },
  {
    name: 'an added required parameter only the test calls show',
    ws: 'vitest',
    target: 'src/strings.ts',
    make: (o) =>
      edit(
        o,
        'export function slugify(text: string): string',
        'export function slugify(text: string, separator: string): string',
      ).replace("slugify(text).split('-')", "slugify(text, '-').split('-')"),
    expect: 'failed',
    codes: [2554],
    elsewhere: true,
  },
  {
    name: 'a changed return type the test uses',
    ws: 'vitest',
    target: 'src/strings.ts',
    make: (o) =>
      edit(
        edit(
          o,
          'wordCounts(text: string): Map<string, number>',
          'wordCounts(text: string): Record<string, number>',
        ),
        /const counts = new Map<string, number>\(\);[\s\S]*?return counts;/,
        "const counts: Record<string, number> = {};\n  for (const word of slugify(text).split('-')) if (word !== '') counts[word] = (counts[word] ?? 0) + 1;\n  return counts;",
      ),
    expect: 'failed',
    elsewhere: true,
  },
  {
    name: 'a global augmentation of Math that breaks another module',
    ws: 'vitest',
    target: 'src/strings.ts',
    make: (o) => `${o}\ndeclare global {\n  interface Math {\n    floor(x: number): string;\n  }\n}\n`,
    expect: 'failed',
    elsewhere: true,
    all: true,
  },
  {
    name: 'a tests-task candidate with a type error in the test file',
    ws: 'vitest',
    target: 'test/strings.test.ts',
    make: (o) =>
      `${o}\nit('is typed', () => {\n  const n: number = slugify('a');\n  expect(n).toBe(1);\n});\n`,
    expect: 'failed',
    codes: [2322],
  },
  {
    name: 'a tests-task candidate that is correct',
    ws: 'vitest',
    target: 'test/strings.test.ts',
    make: (o) => `${o}\nit('keeps digits', () => {\n  expect(slugify('a1 b2')).toBe('a1-b2');\n});\n`,
    expect: 'passed',
  },
];

const services: Partial<Record<Candidate['ws'], TypecheckService>> = {};

beforeAll(async () => {
  await prepareFixtures();
  const confinement = await createBwrapConfinement();
  for (const [name, ws] of Object.entries(WORKSPACES))
    services[name as Candidate['ws']] = createTypecheckService({
      confinement,
      workspaceDir: ws.dir,
      tscArgs: ws.args,
    });
});
afterAll(async () => {
  await Promise.all(Object.values(services).map((s) => s.close()));
});

describe('the type-check service agrees with a fresh tsc', () => {
  it.each(corpus.map((c) => [c.name, c] as const))(
    '%s',
    async (_name, c) => {
      const ws = WORKSPACES[c.ws];
      const text = c.make(await original(ws.dir, c.target));
      const overlay = { [c.target]: text };
      const truth = await freshTsc(ws.dir, overlay, ws.args);
      const got = await services[c.ws]!.check(overlay, { target: c.target });
      expect(got.error).toBeNull();
      expect({ status: got.status, keys: serviceKeys(got, ws.dir) }).toEqual({
        status: truth.status,
        keys: truth.keys,
      });
      expect(got.status).toBe(c.expect);
      for (const code of c.codes ?? [])
        expect(
          truth.keys.some((k) => k.includes(` TS${code}: `)),
          truth.output,
        ).toBe(true);
      if (c.elsewhere)
        expect(
          truth.keys.some((k) => !k.startsWith(`${c.target}(`)),
          truth.output,
        ).toBe(true);
      if (c.alone) expect(got.checkedFiles).toBe(1);
      if (c.all) expect(got.scope).toBe('all');
      else expect(got.scope).toBe('affected');
    },
    120_000,
  );
});
