import { describe, expect, it } from 'vitest';
import { hrwRank, hrwScore, hrwUniform } from '../../placement/hrw.ts';

const keys = Array.from({ length: 6000 }, (_, i) => `key-${i}`);

function owners(candidates: { id: string; weight: number }[]): Map<string, string> {
  return new Map(keys.map((k) => [k, hrwRank(k, candidates)[0]!.id]));
}

describe('hrwUniform', () => {
  it('is deterministic and stays strictly inside (0, 1)', () => {
    for (const k of keys.slice(0, 500)) {
      const u = hrwUniform(k, 'node');
      expect(u).toBe(hrwUniform(k, 'node'));
      expect(u).toBeGreaterThan(0);
      expect(u).toBeLessThan(1);
    }
  });

  it('separates key and id so ("ab","c") and ("a","bc") differ', () => {
    expect(hrwUniform('ab', 'c')).not.toBe(hrwUniform('a', 'bc'));
  });

  it('is roughly uniform (each decile holds 10% ± 1.5% of 6000 draws)', () => {
    const bins = new Array(10).fill(0);
    for (const k of keys) bins[Math.floor(hrwUniform(k, 'x') * 10)]++;
    for (const b of bins) expect(Math.abs(b / keys.length - 0.1)).toBeLessThan(0.015);
  });
});

describe('hrwScore / hrwRank', () => {
  it('never lets a zero or negative weight win', () => {
    expect(hrwScore('k', 'a', 0)).toBe(Number.NEGATIVE_INFINITY);
    expect(hrwScore('k', 'a', -1)).toBe(Number.NEGATIVE_INFINITY);
    expect(hrwScore('k', 'a', Number.NaN)).toBe(Number.NEGATIVE_INFINITY);
    for (const k of keys.slice(0, 300)) {
      expect(
        hrwRank(k, [
          { id: 'zero', weight: 0 },
          { id: 'one', weight: 1 },
        ])[0]!.id,
      ).toBe('one');
    }
  });

  it('ranks independently of input order', () => {
    const a = [
      { id: 'a', weight: 1 },
      { id: 'b', weight: 2 },
      { id: 'c', weight: 3 },
    ];
    for (const k of keys.slice(0, 200)) {
      expect(hrwRank(k, a).map((r) => r.id)).toEqual(hrwRank(k, [...a].reverse()).map((r) => r.id));
    }
  });

  it('gives each candidate a share of keys proportional to its weight', () => {
    const counts = new Map<string, number>();
    for (const id of owners([
      { id: 'a', weight: 1 },
      { id: 'b', weight: 2 },
      { id: 'c', weight: 3 },
    ]).values())
      counts.set(id, (counts.get(id) ?? 0) + 1);
    expect((counts.get('a') ?? 0) / keys.length).toBeCloseTo(1 / 6, 1);
    expect((counts.get('b') ?? 0) / keys.length).toBeCloseTo(2 / 6, 1);
    expect((counts.get('c') ?? 0) / keys.length).toBeCloseTo(3 / 6, 1);
    expect(Math.abs((counts.get('a') ?? 0) / keys.length - 1 / 6)).toBeLessThan(0.02);
    expect(Math.abs((counts.get('c') ?? 0) / keys.length - 3 / 6)).toBeLessThan(0.02);
  });

  it('moves only the keys of a removed candidate, and a new candidate only takes keys', () => {
    const four = ['a', 'b', 'c', 'd'].map((id) => ({ id, weight: 1 }));
    const before = owners(four);
    const after = owners(four.filter((c) => c.id !== 'c'));
    let moved = 0;
    for (const k of keys) {
      if (before.get(k) !== 'c') expect(after.get(k)).toBe(before.get(k));
      else moved++;
    }
    expect(moved).toBeGreaterThan(keys.length / 8);
    const five = owners([...four, { id: 'e', weight: 1 }]);
    for (const k of keys) if (five.get(k) !== 'e') expect(five.get(k)).toBe(before.get(k));
  });

  it('returns an empty ranking for no candidates', () => {
    expect(hrwRank('k', [])).toEqual([]);
  });
});

describe('hrwUniform is the same function as before the one-shot hash', () => {
  it('equals sha256(key NUL id) read as 53 bits, for ASCII, Unicode and empty inputs', async () => {
    const { createHash } = await import('node:crypto');
    const reference = (key: string, id: string) => {
      const d = createHash('sha256').update(key).update('\0').update(id).digest();
      return ((d.readUInt32BE(0) >>> 11) * 2 ** 32 + d.readUInt32BE(4) + 0.5) / 2 ** 53;
    };
    const keys = ['', 'k', `sha256:${'f'.repeat(64)}\nqwen3-coder:30b`, 'ünïcødé\n模型', 'a\0b'];
    const ids = ['', '12D3KooWAbc', 'nœud-é', 'x\0y'];
    for (const k of keys)
      for (const id of ids) expect(hrwUniform(k, id), `${k} / ${id}`).toBe(reference(k, id));
  });
});
