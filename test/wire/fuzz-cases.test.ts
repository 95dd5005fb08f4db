// The seeded hostile-frame generator (test/helpers/fuzz.ts): a case is a function of (valid message,
// seed, index) alone, so a failing case of a long run is replayed by its seed and index.
import { decode } from 'it-length-prefixed';
import { describe, expect, it } from 'vitest';
import { FUZZ_KINDS, fuzzCase, fuzzCases, fuzzPayload } from '../helpers/fuzz.ts';

const valid = { v: 2, kind: 'digests', origin: 'peer', after: 0, limit: 50, nested: { a: [1, 2] } };
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('fuzz cases', () => {
  it('case i is the same made alone or in a run, and the same on every call', () => {
    const run = fuzzCases(valid, 40, 7);
    for (const i of [0, 6, 13, 39]) {
      expect(hex(fuzzCase(valid, 7, i).bytes)).toBe(hex(run[i]!.bytes));
      expect(fuzzCase(valid, 7, i).kind).toBe(run[i]!.kind);
    }
  });

  it('another seed gives other cases; every kind comes up in turn', () => {
    const a = fuzzCases(valid, 20, 1);
    const b = fuzzCases(valid, 20, 2);
    expect(a.map((c) => hex(c.bytes))).not.toEqual(b.map((c) => hex(c.bytes)));
    expect(a.slice(0, FUZZ_KINDS.length).map((c) => c.kind)).toEqual([...FUZZ_KINDS]);
  });

  it('framed kinds are length-prefixed frames; gossip payloads drop the prefix', async () => {
    const i = FUZZ_KINDS.indexOf('wrong top-level type');
    const framed = fuzzCase(valid, 3, i);
    const frames = [];
    for await (const f of decode([framed.bytes])) frames.push(new TextDecoder().decode(f.subarray()));
    expect(frames).toHaveLength(1);
    expect(new TextDecoder().decode(fuzzPayload(valid, 3, i).bytes)).toBe(frames[0]);
    // Raw kinds stay raw.
    const o = FUZZ_KINDS.indexOf('oversized length');
    expect(hex(fuzzPayload(valid, 3, o).bytes)).toBe(hex(fuzzCase(valid, 3, o).bytes));
  });

  it('a truncated frame is a strict prefix of the valid frame; many frames are 200 copies', async () => {
    const whole = fuzzCase(valid, 5, FUZZ_KINDS.indexOf('many frames')).bytes;
    const frames = [];
    for await (const f of decode([whole])) frames.push(new TextDecoder().decode(f.subarray()));
    expect(frames).toHaveLength(200);
    expect(JSON.parse(frames[0]!)).toEqual(valid);
    const cut = fuzzCase(valid, 5, FUZZ_KINDS.indexOf('truncated frame')).bytes;
    const one = whole.subarray(0, whole.length / 200);
    expect(cut.length).toBeLessThan(one.length);
    expect(hex(one).startsWith(hex(cut))).toBe(true);
  });
});

describe('hostile values', () => {
  it('every case of a long run can be made (a 5000-deep array is spliced in as text)', async () => {
    const cases = fuzzCases(valid, 400, 11);
    const deep = cases.filter((c) => new TextDecoder().decode(c.bytes).includes('['.repeat(5000)));
    expect(deep.length).toBeGreaterThan(0);
  });
});
