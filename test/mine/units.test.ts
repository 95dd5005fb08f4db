import { describe, expect, it } from 'vitest';
import { findDeniedTerm } from '../../node/tasks/deny.ts';
import { checkLeakage } from '../../node/tasks/leakage.ts';
import { mine } from '../../node/tasks/mine.ts';
import { pairedSource, stem } from '../../node/tasks/modules.ts';
import { isParseFailure, parseFile } from '../../node/tasks/parse.ts';
import { fenced, moduleSystemOf, packContext } from '../../node/tasks/prompt.ts';
import { groupHash, splitGroups, UnionFind } from '../../node/tasks/split.ts';
import { fingerprint } from '../../protocol/canonical.ts';
import type { Task } from '../../protocol/task.ts';
import { ledgerRoot } from './helpers.ts';

describe('parseFile', () => {
  it('reads imports, re-exports, exports and declarations', () => {
    const r = parseFile(
      'src/x.ts',
      [
        "import def, { a, b as c, type T } from './a.ts';",
        "import * as ns from './ns.ts';",
        "import type { U } from './types.ts';",
        "import './side-effect.ts';",
        "export * from './all.ts';",
        "export { p as q } from './p.ts';",
        "export * as grouped from './g.ts';",
        'export const [one, { two }] = [1, { two: 2 }];',
        'export default function main() {}',
        'export interface I {}',
        'class Hidden {}',
        'const local = 1;',
        'export { local as exposed };',
        "const lazy = () => import('./lazy.ts');",
        "const req = require('./req.js');",
      ].join('\n'),
    );
    if (isParseFailure(r)) throw new Error(r.error);
    expect(r.imports.map((i) => [i.specifier, i.names, i.typeOnly])).toEqual([
      ['./a.ts', ['default', 'a', 'b', 'T'], false],
      ['./ns.ts', ['*'], false],
      ['./types.ts', ['U'], true],
      ['./side-effect.ts', [], false],
      ['./all.ts', [], false],
      ['./p.ts', ['p'], false],
      ['./g.ts', ['*'], false],
      ['./lazy.ts', ['*'], false],
      ['./req.js', ['*'], false],
    ]);
    expect(r.imports[5]!.reexports).toEqual([['q', 'p']]);
    expect(r.exports).toEqual(['one', 'two', 'default', 'I', 'exposed']);
    expect(r.declarations).toEqual(['one', 'two', 'main', 'I', 'Hidden', 'local', 'lazy', 'req']);
    expect(r.barrel).toBe(false);
    expect(r.usesTimers).toBe(false);
  });

  it('reads CommonJS exports and destructured requires', () => {
    const r = parseFile(
      'lib/x.js',
      [
        "const { Stack, peek: top } = require('./stack.js');",
        "const all = require('./all.js');",
        'exports.one = 1;',
        'module.exports.two = 2;',
        'module.exports = { three, four: 4, five() {} };',
      ].join('\n'),
    );
    if (isParseFailure(r)) throw new Error(r.error);
    expect(r.imports.map((i) => [i.specifier, i.names])).toEqual([
      ['./stack.js', ['Stack', 'peek']],
      ['./all.js', ['*']],
    ]);
    expect(r.exports).toEqual(['one', 'two', 'three', 'four', 'five']);
    const single = parseFile('lib/y.js', 'module.exports = function y() {};\n');
    expect(!isParseFailure(single) && single.exports).toEqual(['default']);
  });

  it('recognises barrels and timer use', () => {
    const barrel = parseFile('src/index.ts', "export * from './a.ts';\nexport { b } from './b.ts';\n");
    expect(!isParseFailure(barrel) && barrel.barrel).toBe(true);
    const timers = parseFile('t.test.ts', 'vi.useFakeTimers();\n');
    expect(!isParseFailure(timers) && timers.usesTimers).toBe(true);
    const later = parseFile('t.test.ts', "import { setTimeout } from 'node:timers/promises';\n");
    expect(!isParseFailure(later) && later.usesTimers).toBe(true);
    const nodeMock = parseFile('t.test.ts', "import { mock } from 'node:test';\nmock.timers.enable();\n");
    expect(!isParseFailure(nodeMock) && nodeMock.usesTimers).toBe(true);
    // Mentions in strings and comments are not timer use.
    const quiet = parseFile('t.test.ts', "// setTimeout is not used here\nconst s = 'vi.useFakeTimers()';\n");
    expect(!isParseFailure(quiet) && quiet.usesTimers).toBe(false);
  });

  it('reports the first syntax error with its position', () => {
    const r = parseFile('src/bad.ts', 'const ok = 1;\nexport function (\n');
    expect(isParseFailure(r) && r.error).toMatch(/^syntax error at 2:17: /);
  });
});

describe('layout helpers', () => {
  it('pairs tests with sources by name, beside first, then mirrored', () => {
    expect(stem('src/money/amount.test-d.ts')).toBe('amount');
    expect(stem('lib/x.spec.js')).toBe('x');
    expect(pairedSource('src/a/x.test.ts', ['src/b/x.ts', 'src/a/x.ts'])).toBe('src/a/x.ts');
    expect(pairedSource('tests/a/x.test.ts', ['src/b/x.ts', 'src/a/x.ts'])).toBe('src/a/x.ts');
    expect(pairedSource('src/a/all.test.ts', ['src/a/x.ts'])).toBeNull();
    // A folder named like the test, when no file is: rgb.test.js <-> src/rgb/definition.js.
    expect(pairedSource('test/rgb.test.js', ['src/modes.js', 'src/rgb/definition.js'])).toBe(
      'src/rgb/definition.js',
    );
    expect(pairedSource('test/rgb.test.js', ['src/rgb.js', 'src/rgb/definition.js'])).toBe('src/rgb.js');
  });
});

describe('split', () => {
  it('joins linked modules and names groups by their first member', () => {
    const uf = new UnionFind();
    for (const m of ['d', 'c', 'b', 'a']) uf.add(m);
    uf.union('d', 'b');
    uf.union('b', 'a');
    expect(uf.groups()).toEqual([['a', 'b', 'd'], ['c']]);
    const groups = splitGroups(
      ['a', 'b', 'c', 'd'],
      [
        ['d', 'b'],
        ['a', 'b'],
      ],
      0,
      new Set(['d']),
    );
    expect(groups.get('a')).toMatchObject({ id: 'a+2', split: 'eval', reason: '--eval-modules d' });
    expect(groups.get('c')).toMatchObject({ id: 'c', split: 'train' });
  });

  it('hashes a group independently of member order, into [0, 1)', () => {
    expect(groupHash(['b', 'a'])).toBe(groupHash(['a', 'b']));
    const hs = Array.from({ length: 200 }, (_, i) => groupHash([`m${i}`]));
    expect(hs.every((h) => h >= 0 && h < 1)).toBe(true);
    const below = hs.filter((h) => h < 0.1).length;
    expect(below).toBeGreaterThan(5);
    expect(below).toBeLessThan(40);
  });
});

describe('leakage check', () => {
  const task = (id: string, split: 'train' | 'eval', target: string, prompt: string): Task => {
    const messages = [{ role: 'user' as const, content: prompt }];
    return { id, split, target, messages, promptFingerprint: fingerprint(messages) } as unknown as Task;
  };
  const multi = 'export function f() {\n  return 1;\n}\n';

  it('finds a multi-line and a one-line target inside train prompts', () => {
    const texts: Record<string, string> = {
      'e1.ts': multi,
      'e2.ts': 'export const x = 42;',
      'e3.ts': 'unique text\nnot anywhere\nelse',
    };
    const tasks = [
      task('e1', 'eval', 'e1.ts', 'unused'),
      task('e2', 'eval', 'e2.ts', 'unused'),
      task('e3', 'eval', 'e3.ts', 'unused'),
      task('t1', 'train', 't1.ts', `context:\n\`\`\`ts\n${multi}\`\`\``),
      task('t2', 'train', 't2.ts', 'inline: export const x = 42; inside a line'),
      task('t3', 'train', 't3.ts', 'export function f() {\n  return 2;\n}\n'),
    ];
    const leaks = checkLeakage(tasks, (t) => texts[t.target]!);
    expect(leaks).toEqual([
      { evalTask: 'e1', evalTarget: 'e1.ts', trainTask: 't1' },
      { evalTask: 'e2', evalTarget: 'e2.ts', trainTask: 't2' },
    ]);
  });

  it('ignores empty targets and single-split task sets', () => {
    expect(
      checkLeakage([task('e', 'eval', 'e.ts', 'x'), task('t', 'train', 't.ts', 'x')], () => '  \n'),
    ).toEqual([]);
    expect(checkLeakage([task('t', 'train', 't.ts', 'abc')], () => 'abc')).toEqual([]);
  });
});

describe('prompt helpers', () => {
  it('fences text that itself holds fences with a longer fence', () => {
    expect(fenced('a ``` b', 'ts')).toBe('````ts\na ``` b\n````');
    expect(fenced('x\n', 'js')).toBe('```js\nx\n```');
  });

  it('tells ES modules from CommonJS', () => {
    expect(moduleSystemOf('a.js', "import x from './x.js';\n")).toBe('ES modules');
    expect(moduleSystemOf('a.js', "const x = require('./x');\nmodule.exports = x;\n")).toBe('CommonJS');
    expect(moduleSystemOf('a.cjs', 'anything')).toBe('CommonJS');
    expect(moduleSystemOf('a.ts', 'const x = 1;\n')).toBe('ES modules');
  });

  it('packs context in order and lets later small files fill the budget', () => {
    const f = (path: string, n: number) => ({ path, role: 'r', text: 'x'.repeat(n) });
    const packed = packContext([f('a', 5), f('big', 20), f('b', 4)], 10);
    expect(packed.shown.map((x) => x.path)).toEqual(['a', 'b']);
    expect(packed.cut.map((x) => x.path)).toEqual(['big']);
    expect(packed.chars).toBe(9);
  });
});

describe('deny terms and abort', () => {
  it('matches terms case-insensitively and returns the first one found', () => {
    expect(findDeniedTerm('Hello SECRET world', ['nope', 'secret'])).toBe(1);
    expect(findDeniedTerm('clean', ['secret'])).toBeNull();
    expect(findDeniedTerm('anything', [])).toBeNull();
  });

  it('reports progress per phase and takes a judge timeout', async () => {
    const seen = new Map<string, { done: number; total: number }>();
    const r = await mine({
      root: ledgerRoot,
      testTimeoutMs: 4321,
      onProgress: (p) => {
        const last = seen.get(p.phase);
        if (last) expect(p.done).toBeGreaterThanOrEqual(last.done);
        seen.set(p.phase, { done: p.done, total: p.total });
      },
    });
    expect([...seen.keys()]).toEqual(['read', 'tasks']);
    for (const { done, total } of seen.values()) expect(done).toBe(total);
    expect(new Set(r.tasks.map((t) => t.judge.timeoutMs))).toEqual(new Set([4321]));
    expect(Object.keys(r.summary.timings)).toEqual([
      'identity',
      'discover',
      'read',
      'graph',
      'install-check',
      'tasks',
      'leakage',
    ]);
  });

  it('stops mining when aborted', async () => {
    const ac = new AbortController();
    ac.abort(new Error('stop now'));
    await expect(mine({ root: ledgerRoot, signal: ac.signal })).rejects.toThrow('stop now');
  });
});
