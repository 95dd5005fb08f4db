// The replay's host-side parts that need no box: the wrapper's export list and module resolution,
// parsing a recording (anchors, calls left out), the answer key from two self-replays, and the lines
// `vtnode calibrate` prints.
import { describe, expect, it } from 'vitest';
import { replayLines } from '../../../cli/commands/calibrate.ts';
import { answerKey } from '../../../sandbox/replay/judge.ts';
import { isTestPath } from '../../../sandbox/replay/prune.ts';
import { parseRecording } from '../../../sandbox/replay/recording.ts';
import {
  recorderWrapper,
  resolveRelative,
  targetExports,
  targetImports,
} from '../../../sandbox/replay/wrapper.ts';

describe('wrapper', () => {
  it("reads the target's value exports from its syntax, types and re-exports left out", () => {
    const text = `
      export function f() {}
      export class C {}
      export const a = 1, { b, c: [d] } = obj;
      export let live = 0;
      export enum E { X }
      export const enum K { Y }
      export interface I {}
      export type T = number;
      export declare const ambient: number;
      const local = 1;
      export { local as renamed, type T as T2 };
      export { fromElsewhere } from './x.ts';
      export default class {}
    `;
    expect(targetExports(text, 'a.ts')).toEqual({
      wrapped: ['f', 'C', 'a', 'b', 'd', 'E', 'renamed', 'default'],
      live: ['live'],
    });
  });

  it('lists what a module imports, type-only included, and resolves relative specifiers to workspace files', () => {
    const text =
      "import { a } from './a.ts';\nimport type { B } from '../b';\nimport x from 'pkg';\nexport * from './c.js';\n";
    expect(targetImports(text, 'src/m.ts')).toEqual(['./a.ts', '../b', 'pkg', './c.js']);
    const files = new Set(['src/a.ts', 'b/index.ts', 'src/c.ts']);
    const exists = (f: string) => files.has(f);
    expect(resolveRelative('src/m.ts', './a.ts', exists)).toBe('src/a.ts');
    expect(resolveRelative('src/m.ts', '../b', exists)).toBe('b/index.ts');
    expect(resolveRelative('src/m.ts', './c.js', exists)).toBe('src/c.ts');
    expect(resolveRelative('src/m.ts', 'pkg', exists)).toBeNull();
    expect(resolveRelative('src/m.ts', '../../outside.ts', () => true)).toBeNull();
  });

  it('writes a wrapper that re-exports the moved module through the recorder', () => {
    const text = recorderWrapper({
      target: 'src/money/amount.ts',
      owner: '',
      imports: 'src/money/amount.vtnode-imports.ts',
      exports: { wrapped: ['money', 'my-name'], live: ['count'] },
      testFiles: ['src/money/amount.test.ts'],
    });
    expect(text).toContain('import * as __vtnodeReal from "./amount.vtnode-real.ts";');
    expect(text).toContain('from "../../.vtnode-replay/record.mjs"');
    expect(text).toContain('from "./amount.vtnode-imports.ts"');
    expect(text).toContain('export * from "./amount.vtnode-real.ts";');
    expect(text).toContain('export { __vtnodeW1 as "my-name" };');
    expect(text).toContain('__vtnodeRec.register("count", __vtnodeReal["count"]);');
  });

  it('knows test files and test folders', () => {
    for (const p of [
      'src/a.test.ts',
      'src/a.spec.mjs',
      'src/a.test-d.ts',
      'test/helpers.ts',
      'src/__tests__/x.ts',
      'src/__snapshots__/a.snap',
    ])
      expect(isTestPath(p), p).toBe(true);
    for (const p of ['src/testing.ts', 'src/contest.ts', 'src/latest/x.ts'])
      expect(isTestPath(p), p).toBe(false);
  });
});

const call = (i: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    e: 'call',
    i,
    kind: 'fn',
    name: 'f',
    test: 'T > t',
    t: 0,
    pn: 0,
    args: [i],
    out: { r: i * 2 },
    after: [i],
    ...extra,
  });

describe('parseRecording', () => {
  it('gives each call the places later calls name, and leaves out calls it cannot rebuild', () => {
    const text = [
      call(0, { kind: 'new', name: 'C', out: { r: { $: 'inst', c: 'C', v: {} } } }),
      call(1, { kind: 'method', self: { $: 'ref', c: 0, p: [] }, args: [{ $: 'ref', c: 0, p: ['kx'] }] }),
      call(2, { args: [{ $: 'fn' }] }),
      call(3, { m: 'src/other.ts', args: [{ $: 'ref', c: 7, p: [] }] }),
      call(4, { out: { r: { $: 'promise' } } }),
      JSON.stringify({ e: 'settle', i: 4, ok: 5 }),
      call(5, { out: { r: { $: 'promise' } } }),
    ].join('\n');
    const calls = parseRecording(text, 'a.test.ts');
    expect(calls[0]!.input.anchors).toEqual([[], ['kx']]);
    expect(calls[2]!.input.skip).toBe('a function (callback) is passed');
    expect(calls[3]!.input).toMatchObject({
      m: 'src/other.ts',
      skip: 'it names call 7, which is not an earlier call',
    });
    expect(calls[4]!.output.settled).toEqual({ ok: 5 });
    expect(calls[5]!.output.settled).toEqual({ pending: true });
  });

  it('names the line of a malformed recording', () => {
    expect(() => parseRecording(`${call(0)}\n{"e":"call"}`, 'a.test.ts')).toThrow(/a\.test\.ts, line 2: /);
    expect(() => parseRecording('nope', 'a.test.ts')).toThrow(/line 1: not JSON/);
    expect(() => parseRecording(call(1), 'a.test.ts')).toThrow(/call 1 out of order/);
  });
});

describe('answerKey', () => {
  const recorded = [
    {
      file: 'a.test.ts',
      calls: parseRecording(
        [call(0), call(1), call(2, { args: [{ $: 'fn' }] }), call(3, { m: 'x.ts' })].join('\n'),
        'a.test.ts',
      ),
    },
  ];
  const replayed = (second: number) =>
    new Map([
      ['a.test.ts\0' + '0', { i: 0, output: { out: { r: 0 }, after: [0] } }],
      ['a.test.ts\0' + '1', { i: 1, output: { out: { r: second }, after: [1] } }],
    ]);

  it('keeps the target calls the recording and both self-replays agree on, and says why the others are left out', () => {
    const key = answerKey(recorded, replayed(2), replayed(3), 3);
    expect(key).toMatchObject({ replayable: true, recorded: 3, kept: 1 });
    expect(key.files[0]!.expected.map((e) => e.i)).toEqual([0]);
    // The setup call into x.ts stays in the script (it builds state) and is never compared.
    expect(key.files[0]!.script.map((c) => c.i)).toEqual([0, 1, 2, 3]);
    expect(key.dropped.sort()).toEqual(
      [
        "1× the reference's two replays differ (it is not deterministic)",
        '1× a function (callback) is passed',
      ].sort(),
    );
  });

  it('a task none of whose calls replays is not replayable, with the reasons', () => {
    const key = answerKey(recorded, new Map(), new Map(), 3);
    expect(key.replayable).toBe(false);
    expect(key.why).toMatch(/^no recorded call replays: 2× the reference's replay did not perform it/);
  });
});

describe('calibrate', () => {
  it('prints the share of replayable tasks and calls, and why a task is not replayable', () => {
    expect(
      replayLines([
        { taskId: 'a', replayable: true, why: null, recorded: 10, kept: 9, mode: 'node' },
        { taskId: 'c', replayable: true, why: null, recorded: 4, kept: 4, mode: 'vitest' },
        {
          taskId: 'b',
          mode: 'vitest',
          replayable: false,
          why: 'the replay drives vitest only, not jest',
          recorded: 0,
          kept: 0,
        },
      ]),
    ).toEqual([
      'replay: 2 of 3 kept file task(s) replayable (67%); 13 of the 14 calls the tests make replay (93%); 1 of 2 replayed by node alone',
      '  a: 9/10 calls replay (node)',
      '  c: 4/4 calls replay (vitest)',
      '  b: not replayable: the replay drives vitest only, not jest',
    ]);
    expect(replayLines([])).toEqual([]);
  });
});
