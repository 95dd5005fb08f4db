import { describe, expect, it } from 'vitest';
import { canonicalJson, fingerprint, sha256Hex } from '../../protocol/canonical.ts';
import { ParseError, parseJsonWith } from '../../protocol/parse.ts';
import { Task } from '../../protocol/task.ts';

describe('canonical JSON and fingerprints', () => {
  it('sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: undefined } })).toBe(
      '{"a":{"d":[3,{"y":2,"z":1}]},"b":1}',
    );
    expect(canonicalJson([undefined, 'x'])).toBe('[null,"x"]');
  });

  it('gives equal fingerprints for equal data built in any key order', () => {
    expect(fingerprint({ a: 1, b: [1, 2] })).toBe(fingerprint({ b: [1, 2], a: 1 }));
    expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: 2 }));
    expect(fingerprint([1, 2])).not.toBe(fingerprint([2, 1]));
    expect(fingerprint('x')).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('refuses values JSON cannot carry, naming where', () => {
    expect(() => canonicalJson({ a: [1, Number.NaN] })).toThrow(/\$\.a\[1\]/);
    expect(() => canonicalJson({ f: () => 1 })).toThrow(/\$\.f has type function/);
  });
});

describe('parseJsonWith', () => {
  it('names the input and each field', () => {
    expect(() => parseJsonWith(Task, '{"id":"x"}', 'tasks.jsonl:3')).toThrow(/^tasks\.jsonl:3: .*kind/);
    expect(() => parseJsonWith(Task, 'nope', 'tasks.jsonl:4')).toThrow(ParseError);
    expect(() => parseJsonWith(Task, 'nope', 'tasks.jsonl:4')).toThrow(/tasks\.jsonl:4: \(root\): not JSON/);
  });
});
