// The replay's canonical codec (sandbox/replay/runtime/codec.mjs) and the host's comparison: pure.
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../protocol/canonical.ts';
import { behaviour, compareReplay, outputKey } from '../../../sandbox/replay/compare.ts';
import { Tree } from '../../../sandbox/replay/recording.ts';
import { at, decode, encode, unbuildable } from '../../../sandbox/replay/runtime/codec.mjs';

const noRefs = () => {
  throw new Error('no refs here');
};
/** encode → JSON text → parse (as the host does) → decode. */
const roundTrip = (v: unknown) => decode(Tree.parse(JSON.parse(JSON.stringify(encode(v)))), noRefs);

class Point {
  x: number;
  y: number;
  constructor(x: number, y: number) {
    this.x = x;
    this.y = y;
  }
}
class CodedError extends Error {
  code = 'E_X';
}

describe('encode', () => {
  it('keeps what JSON cannot say: -0, NaN, ±Infinity, bigint, undefined, registered symbols', () => {
    expect(encode([-0, 0, Number.NaN, Infinity, -Infinity, 10n, undefined, Symbol.for('k'), null])).toEqual([
      { $: 'n', v: '-0' },
      0,
      { $: 'n', v: 'NaN' },
      { $: 'n', v: 'Infinity' },
      { $: 'n', v: '-Infinity' },
      { $: 'big', v: '10' },
      { $: 'u' },
      { $: 'sym', v: 'k', g: true },
      null,
    ]);
  });

  it('sorts the keys of plain objects and marks frozen ones; class instances carry their class and state', () => {
    const a = encode({ b: 1, a: 2 });
    expect(Object.keys((a as { v: object }).v)).toEqual(['a', 'b']);
    expect(encode(Object.freeze({ a: 1 }))).toEqual({ $: 'obj', v: { a: 1 }, f: true });
    expect(encode(new Point(1, 2))).toEqual({ $: 'inst', c: 'Point', v: { x: 1, y: 2 } });
    expect(encode(Object.create(null))).toEqual({ $: 'obj', v: {} });
  });

  it('encodes Map, Set, Date, RegExp, typed arrays, ArrayBuffer, errors with class, message and own state', () => {
    expect(encode(new Map([[1, 'a']]))).toEqual({ $: 'map', v: [[1, 'a']] });
    expect(encode(new Set(['x']))).toEqual({ $: 'set', v: ['x'] });
    expect(encode(new Date(5))).toEqual({ $: 'date', v: 5 });
    expect(encode(new Date(Number.NaN))).toEqual({ $: 'date', v: null });
    expect(encode(/a+/gi)).toEqual({ $: 're', src: 'a+', flags: 'gi' });
    expect(encode(new Uint8Array([1, 2]))).toEqual({ $: 'ta', c: 'Uint8Array', v: [1, 2] });
    expect(encode(new BigInt64Array([3n]))).toEqual({ $: 'ta', c: 'BigInt64Array', v: ['3'] });
    expect(encode(new Uint8Array([7]).buffer)).toEqual({ $: 'ab', v: [7] });
    expect(encode(new CodedError('boom'))).toEqual({
      $: 'err',
      c: 'CodedError',
      m: 'boom',
      v: { code: 'E_X' },
    });
    expect(encode(new RangeError('r'))).toEqual({ $: 'err', c: 'RangeError', m: 'r', v: {} });
  });

  it('encodes functions, promises, cycles, throwing getters and oversized values without throwing', () => {
    const cyclic: { self?: unknown; list: unknown[] } = { list: [] };
    cyclic.self = cyclic;
    cyclic.list.push(cyclic);
    expect(encode(cyclic)).toEqual({
      $: 'obj',
      v: { list: [{ $: 'cycle', up: 2 }], self: { $: 'cycle', up: 1 } },
    });
    expect(encode(() => 1)).toEqual({ $: 'fn' });
    expect(encode(Promise.resolve(1))).toEqual({ $: 'promise' });
    const bad = {
      get x() {
        throw new Error('no');
      },
    };
    expect(encode(bad)).toEqual({ $: 'opaque', why: 'reading it threw: no' });
    const big = encode(
      Array.from({ length: 50 }, (_, i) => i),
      { maxNodes: 10 },
    ) as unknown[];
    expect(big.slice(8, 10)).toEqual([8, { $: 'trunc' }]);
    expect(big.at(-1)).toEqual({ $: 'trunc' });
  });

  it('names each object met by its path, and replaces objects handed out earlier by refs', () => {
    const inner = { z: 1 };
    const seen: string[][] = [];
    encode({ a: [inner], m: new Map([['k', inner]]) }, { seen: (_o, p) => seen.push(p) });
    expect(seen).toEqual([[], ['ka'], ['ka', 'a0'], ['km'], ['km', 'm0']]);
    const value = { a: [inner], m: new Map([['k', inner]]) };
    expect(at(value, ['ka', 'a0'])).toBe(inner);
    expect(at(value, ['km', 'm0'])).toBe(inner);
    expect(at(value, ['km', 'K0'])).toBe('k');
    const ref = { $: 'ref', c: 3, p: ['ka'] };
    expect(encode([inner], { ref: (o) => (o === inner ? ref : undefined) })).toEqual([ref]);
  });
});

describe('decode', () => {
  it('rebuilds every buildable form exactly', () => {
    const v = {
      n: [-0, Number.NaN, Infinity, 1.5],
      b: 2n ** 70n,
      u: undefined,
      m: new Map<unknown, unknown>([[{ k: 1 }, new Set([1, 'a'])]]),
      d: new Date(0),
      r: /x/y,
      t: new Float64Array([-0, 1]),
      s: Symbol.for('s'),
    };
    const back = roundTrip(v) as typeof v;
    expect(Object.is(back.n[0], -0)).toBe(true);
    expect(back).toEqual(v);
    expect(back.m).toBeInstanceOf(Map);
    expect(Object.isFrozen(roundTrip(Object.freeze({ a: 1 })))).toBe(true);
  });

  it('rebuilds a class instance another module exports from its prototype and state', () => {
    const tree = encode(new Point(1, 2), {
      klass: (c) => (c === Point ? { m: './p.ts', x: 'Point' } : undefined),
    });
    expect(unbuildable(tree)).toBeNull();
    const back = decode(tree, (r) => (r.m === './p.ts' && r.x === 'Point' ? Point : undefined));
    expect(back).toBeInstanceOf(Point);
    expect(back).toEqual(new Point(1, 2));
  });

  it('refuses what a replay cannot rebuild, saying why', () => {
    expect(unbuildable(encode([() => 1]))).toMatch(/function/);
    expect(unbuildable(encode({ p: new Point(1, 2) }))).toMatch(/instance of Point/);
    expect(unbuildable(encode(Symbol('local')))).toMatch(/unique symbol/);
    expect(unbuildable(encode(Promise.resolve()))).toMatch(/promise/);
    expect(() => decode({ $: 'fn' }, noRefs)).toThrow(/cannot rebuild/);
    expect(() => decode({ $: 'inst', c: 'Point', v: {} }, noRefs)).toThrow(/cannot rebuild/);
  });
});

describe('Tree schema', () => {
  it('accepts codec output and refuses unknown tags', () => {
    expect(Tree.safeParse(encode({ a: [1, new Map()] })).success).toBe(true);
    expect(Tree.safeParse({ $: 'nope' }).success).toBe(false);
    expect(Tree.safeParse(undefined).success).toBe(false);
  });
});

describe('comparison', () => {
  const out = (r: unknown) => ({ out: { r: encode(r) as Tree }, after: [] });

  it('behaviour ignores Map/Set order, frozenness and error messages, and nothing else', () => {
    expect(
      canonicalJson(
        behaviour(
          encode(
            new Map([
              [1, 'a'],
              [2, 'b'],
            ]),
          ),
        ),
      ),
    ).toBe(
      canonicalJson(
        behaviour(
          encode(
            new Map([
              [2, 'b'],
              [1, 'a'],
            ]),
          ),
        ),
      ),
    );
    expect(canonicalJson(behaviour(encode(new Set([1, 2]))))).toBe(
      canonicalJson(behaviour(encode(new Set([2, 1])))),
    );
    expect(outputKey(out(Object.freeze({ a: 1 })), 'behaviour')).toBe(outputKey(out({ a: 1 }), 'behaviour'));
    expect(outputKey(out(Object.freeze({ a: 1 })), 'exact')).not.toBe(outputKey(out({ a: 1 }), 'exact'));
    const thrown = (e: Error) => ({ out: { t: encode(e) as Tree }, after: [] });
    expect(outputKey(thrown(new RangeError('a')), 'behaviour')).toBe(
      outputKey(thrown(new RangeError('b')), 'behaviour'),
    );
    expect(outputKey(thrown(new RangeError('a')), 'behaviour')).not.toBe(
      outputKey(thrown(new TypeError('a')), 'behaviour'),
    );
    expect(outputKey(out([1, 2]), 'behaviour')).not.toBe(outputKey(out([2, 1]), 'behaviour'));
    expect(outputKey(out(-0), 'behaviour')).not.toBe(outputKey(out(0), 'behaviour'));
    expect(outputKey(out(1n), 'behaviour')).not.toBe(outputKey(out(1), 'behaviour'));
    expect(outputKey(out(new Point(1, 2)), 'behaviour')).not.toBe(
      outputKey(out({ x: 1, y: 2 }), 'behaviour'),
    );
  });

  it("behaviour compares the state of another module's class, not of the target's own classes", () => {
    class Own {
      cents: number;
      constructor(cents: number) {
        this.cents = cents;
      }
    }
    class Renamed {
      amount: number;
      constructor(amount: number) {
        this.amount = amount;
      }
    }
    Object.defineProperty(Renamed, 'name', { value: 'Own' });
    // The target's own class (no other module exports it): an honest rewrite may keep other fields.
    expect(outputKey(out(new Own(500)), 'behaviour')).toBe(outputKey(out(new Renamed(5)), 'behaviour'));
    expect(outputKey(out(new Own(500)), 'exact')).not.toBe(outputKey(out(new Renamed(5)), 'exact'));
    expect(outputKey(out(new Own(500)), 'behaviour')).not.toBe(outputKey(out(new Point(5, 0)), 'behaviour'));
    // Another module's class: its state is what the candidate computed.
    const klass = (c: unknown) => (c === Point ? { m: './p.ts', x: 'Point' } : undefined);
    const exported = (p: Point) => ({ out: { r: encode(p, { klass }) as Tree }, after: [] });
    expect(outputKey(exported(new Point(1, 2)), 'behaviour')).not.toBe(
      outputKey(exported(new Point(1, 3)), 'behaviour'),
    );
    expect(outputKey(exported(new Point(1, 2)), 'behaviour')).toBe(
      outputKey(exported(new Point(1, 2)), 'behaviour'),
    );
  });

  it('reports each differing, missing or unperformed call by name', () => {
    const expected = [
      { file: 'a.test.ts', i: 0, test: 'A > one', name: 'f()', output: out(1) },
      { file: 'a.test.ts', i: 1, test: 'A > two', name: '.g()', output: out('x') },
      { file: 'a.test.ts', i: 2, test: null, name: 'h()', output: out(3) },
      { file: 'a.test.ts', i: 3, test: null, name: 'k()', output: out(4) },
    ];
    const actual = new Map([
      ['a.test.ts\0' + '0', { i: 0, output: out(1) }],
      ['a.test.ts\0' + '1', { i: 1, output: out('y') }],
      ['a.test.ts\0' + '2', { i: 2, missing: 'no object at call 1' }],
    ]);
    const d = compareReplay(expected, actual, (f, i) => `${f}\0${i}`);
    expect(d.map((x) => [x.i, x.name])).toEqual([
      [1, '.g()'],
      [2, 'h()'],
      [3, 'k()'],
    ]);
    expect(d[0]!.detail).toBe('out: expected {"r":"x"}, got {"r":"y"}');
    expect(d[1]!.detail).toMatch(/not performed \(no object at call 1\)/);
  });
});
