import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { addedTamper, type Role, tamperHits } from '../../sandbox/tamper.ts';
import { REPO_ROOT } from './fixtures.ts';

const rules = (code: string, role: Role = 'source', file = 'src/x.ts') =>
  tamperHits(code, file, role).map((r) => r.rule);

const MATCHERS = 'test framework imported by a source module';
const GLOBAL = 'test framework global used by a source module';
const WRITE = 'write to a builtin, a global or a prototype';
const TASK = "write to the runner's per-test state";
const COMPUTED = 'computed access to a builtin or a global';
const EVAL = 'eval or Function';
const PROCESS = 'process channels (exit, signals, stdio, ipc, argv)';

describe('runner API reached from a source module', () => {
  it.each([
    [
      "import { expect } from 'vitest';\nexpect.extend({ toBe: () => ({ pass: true, message: () => '' }) });",
      MATCHERS,
    ],
    ["import * as v from 'vitest';\nv.expect.extend({});", MATCHERS],
    ["import { chai } from 'vitest';\nchai.Assertion.prototype.equal = () => {};", MATCHERS],
    ["const { expect } = await import('vitest');", MATCHERS],
    ["const v = require('@vitest/expect');", MATCHERS],
    ["import { expect } from '@jest/globals';", MATCHERS],
    ["import assert from 'node:assert';\nassert.strictEqual = () => {};", MATCHERS],
    ["import * as t from 'node:test';", MATCHERS],
    ['expect.extend({ toEqual: () => ({ pass: true }) });', GLOBAL],
    ['Object.getPrototypeOf(expect(1)).toBe = () => undefined;', GLOBAL],
    ['globalThis.expect.extend({});', GLOBAL],
    ["globalThis['vi'].fn();", GLOBAL],
    ['onTestFailed(() => {});', GLOBAL],
    ['const m = { expect };', GLOBAL],
    [
      "globalThis[Symbol.for('$$jest-matchers-object')].matchers.toBe = () => ({ pass: true });",
      "the runner's or vtnode's internals named",
    ],
    ["const k = Symbol.for('x' + 'y');", 'global symbol registry'],
    ["const mod = 'vit' + 'est';\nawait import(mod);", 'computed import or require'],
  ])('%s → %s', (code, rule) => {
    expect(rules(code)).toContain(rule);
  });
});

describe('builtins, globals and prototypes written', () => {
  it.each([
    'Object.is = (a, b) => a === b || a !== b;',
    "Object['is'] = () => true;",
    'const O = Object;\nO.is = () => true;',
    'const { prototype } = Array;\nprototype.every = () => true;',
    "Object.defineProperty(Object, 'is', { value: () => true });",
    "Reflect.set(Object, 'is', () => true);",
    'Object.assign(JSON, { stringify: () => "{}" });',
    'Array.prototype.every = function () { return true; };',
    'Map.prototype.get = () => 1;',
    'JSON.stringify = () => "{}";',
    'globalThis.Object = class {};',
    'global.Promise = class {};',
    'window.fetch = () => 1;',
    '[].constructor.prototype.includes = () => true;',
    'Object.getPrototypeOf([]).map = () => [];',
    '({}).__proto__.toString = () => "";',
    'delete Object.is;',
    'Math.abs = (x) => x;',
    'Number.isNaN = () => false;',
    'Date.now = () => 0;',
    'setTimeout = (f) => f();',
    'console.log = () => {};',
    'process.env.CI = "";',
    "const { defineProperty } = Object;\ndefineProperty(Array.prototype, 'map', { value: () => [] });",
    'Error.prepareStackTrace = () => "";',
    'Object.setPrototypeOf(globalThis, null);',
  ])('%s', (code) => {
    expect(rules(code)).toContain(WRITE);
  });

  it('obfuscated names count as computed access', () => {
    expect(rules("const g = globalThis;\ng['Ob' + 'ject'].is = () => true;")).toEqual(
      expect.arrayContaining([COMPUTED, WRITE]),
    );
    expect(rules('const k = "is";\nObject[k] = () => true;')).toEqual(
      expect.arrayContaining([COMPUTED, WRITE]),
    );
    expect(rules("Reflect.get(globalThis, 'Object');")).toContain(COMPUTED);
  });
});

describe("the runner's per-test state", () => {
  it.each([
    'beforeEach((ctx) => { Object.assign(ctx.task, { fails: true }); });',
    'beforeEach((ctx) => { ctx.task.fails = true; });',
    "afterEach(({ task }) => { task.result.state = 'pass'; });",
    "afterEach((t) => { t.mode = 'skip'; });",
    "Reflect.set(ctx.task, 'fails', true);",
  ])('%s', (code) => {
    expect(rules(code)).toContain(TASK);
  });
});

describe('eval, processes and stdio', () => {
  it.each([
    ["eval('1');", EVAL],
    ["(0, eval)('1');", EVAL],
    ["const e = eval;\ne('1');", EVAL],
    ["globalThis.eval('1');", EVAL],
    ["new Function('return 1');", EVAL],
    ["Function('return 1')();", EVAL],
    ["(() => {}).constructor('return process')();", EVAL],
    ["setTimeout('process.exit(0)', 1);", EVAL],
    ['process.exit(0);', PROCESS],
    ["process['exit'](0);", PROCESS],
    ['process.exitCode = 0;', PROCESS],
    ["process.on('exit', () => {});", PROCESS],
    ["process.stdout.write('ok');", PROCESS],
    ["process.send({ type: 'done' });", PROCESS],
    ["import proc from 'node:process';\nproc.exit(0);", PROCESS],
    ["import * as p from 'process';\np.kill(1);", PROCESS],
    ["import { exit as bye } from 'node:process';\nbye(0);", PROCESS],
    ["import { writeSync } from 'node:fs';\nwriteSync(1, 'ok');", PROCESS],
    ["import { spawn } from 'node:child_process';", 'process, thread, loader or engine module'],
    ["import { Worker } from 'node:worker_threads';", 'process, thread, loader or engine module'],
    ["import vm from 'vm';", 'process, thread, loader or engine module'],
    ["import { createRequire } from 'node:module';", 'process, thread, loader or engine module'],
    ["import inspector from 'node:inspector';", 'process, thread, loader or engine module'],
    ["readFileSync('/proc/self/environ');", "the runner's or vtnode's internals named"],
    ["writeFileSync('/dev/stdout', 'x');", "the runner's or vtnode's internals named"],
    ["const f = '.vtnode/integrity.mjs';", "the runner's or vtnode's internals named"],
  ])('%s → %s', (code, rule) => {
    expect(rules(code)).toContain(rule);
  });
});

describe('test files (tests tasks)', () => {
  it.each([
    [
      "expect.extend({ toBe: () => ({ pass: true, message: () => '' }) });",
      'matchers extended by a test file',
    ],
    ['expect.addEqualityTesters([() => true]);', 'matchers extended by a test file'],
    [
      "import { readFileSync } from 'node:fs';\nexpect(readFileSync('src/a.ts', 'utf8')).toContain('+');",
      'file system imported by a test file',
    ],
    [
      "import { add } from '../src/math.ts';\nexpect(add.toString()).toContain('a + b');",
      'function source read by a test file',
    ],
    ["expect(Function.prototype.toString.call(x)).toBe('');", 'function source read by a test file'],
    ['Object.is = () => true;', WRITE],
    ['beforeEach((ctx) => { ctx.task.fails = true; });', TASK],
  ])('%s → %s', (code, rule) => {
    expect(rules(code, 'tests', 'test/x.test.ts')).toContain(rule);
  });

  it('leaves ordinary tests alone', () => {
    const code = `import { describe, expect, it, vi } from 'vitest';\nimport { money } from '../src/money.ts';\ndescribe('m', () => {\n  it('formats', () => {\n    vi.spyOn(Math, 'random').mockReturnValue(0.5);\n    expect(money(1).toString()).toBe('1.00');\n    expect({ a: 1 }).toEqual({ a: 1 });\n  });\n});\n`;
    expect(rules(code, 'tests', 'test/x.test.ts')).toEqual([]);
  });
});

describe('ordinary source code is not tampering', () => {
  it.each([
    'export function add(a: number, b: number): number { return a + b; }',
    'export class Stack<T> { #items: T[] = []; push(x: T) { this.#items.push(x); } toString() { return "s"; } }',
    'const o = { expect: 1, it: 2 };\nexport const v = o.expect + o.it;',
    'export function f(this: { result: number }) { this.result = 1; }',
    'export const keys = Object.keys({ a: 1 });\nexport const same = Object.is(1, 1);',
    "function Legacy() {}\nLegacy.prototype.greet = function () { return 'hi'; };",
    'const target = {};\nObject.defineProperty(target, "x", { value: 1 });\nObject.assign(target, { y: 2 });',
    'export const t = setTimeout(() => 1, 10);\nclearTimeout(t);',
    "type Expect = { it: string };\nexport const e: Expect = { it: 'x' };",
    'export function describe(x: unknown) { return String(x); }\ndescribe(1);',
    'export const r = /test/.test("a");',
  ])('%s', (code) => {
    expect(rules(code)).toEqual([]);
  });

  it('finds nothing in the example corpus sources', () => {
    for (const f of [
      'src/money/amount.ts',
      'src/journal/journal.ts',
      'src/parse/csv.ts',
      'src/fx/convert.ts',
    ]) {
      const text = readFileSync(join(REPO_ROOT, 'examples/ledger', f), 'utf8');
      expect(rules(text, 'source', f), f).toEqual([]);
    }
  });
});

describe('relative to the original', () => {
  it('counts only what the candidate adds, with examples', () => {
    const original =
      "import { spawn } from 'node:child_process';\nObject.defineProperty(globalThis, 'x', { value: 1 });\n";
    expect(addedTamper(original, original, 'src/x.ts', 'source')).toEqual([]);
    const candidate = `${original}Object.is = () => true;\n`;
    expect(addedTamper(original, candidate, 'src/x.ts', 'source')).toEqual([
      { name: WRITE, added: 1, examples: expect.arrayContaining(['Object.is = () => true']) },
    ]);
  });

  it('does not count comments or strings', () => {
    expect(rules("// Object.is = f\nexport const s = 'process.exit(0)';")).toEqual([]);
  });
});
