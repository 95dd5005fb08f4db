import { describe, expect, it } from 'vitest';
import { createOffenceLedger } from '../../node/wire/offences.ts';

describe('offence ledger', () => {
  it('bans a peer at the threshold inside the window, not before', () => {
    const l = createOffenceLedger({ threshold: 3, windowMs: 1000, banMs: 500 });
    expect(l.record('a', 'bad frame', 0).banned).toBe(false);
    expect(l.record('a', 'bad frame', 100).banned).toBe(false);
    expect(l.banned('a', 100)).toBe(false);
    expect(l.record('a', 'bad frame', 200)).toEqual({ banned: true, until: 700, fresh: true });
    expect(l.record('a', 'bad frame', 300)).toEqual({ banned: true, until: 700, fresh: false });
    expect(l.banned('a', 699)).toBe(true);
    expect(l.banned('a', 700)).toBe(false);
    expect(l.banned('b', 200)).toBe(false);
  });

  it('forgets offences older than the window', () => {
    const l = createOffenceLedger({ threshold: 3, windowMs: 1000 });
    l.record('a', 'x', 0);
    l.record('a', 'x', 500);
    expect(l.record('a', 'x', 1200).banned).toBe(false); // the one at 0 fell out
    expect(l.record('a', 'x', 1300).banned).toBe(true);
  });

  it('doubles each further ban up to the cap; offences during a ban do not extend it', () => {
    const l = createOffenceLedger({ threshold: 1, windowMs: 10, banMs: 100, maxBanMs: 350 });
    expect(l.record('a', 'x', 0).until).toBe(100);
    expect(l.record('a', 'x', 50).until).toBe(100);
    expect(l.record('a', 'x', 100).until).toBe(300);
    expect(l.record('a', 'x', 300).until).toBe(650);
    expect(l.record('a', 'x', 650).until).toBe(1000);
    expect(l.list(650)[0]).toMatchObject({ peer: 'a', bans: 4, total: 5, bannedUntil: 1000, lastWhy: 'x' });
  });

  it('remembers a bounded number of peers, forgetting the stalest offender', () => {
    const l = createOffenceLedger({ threshold: 2, maxPeers: 3 });
    for (const p of ['a', 'b', 'c']) l.record(p, 'x', 0);
    l.record('a', 'x', 1); // a is now the freshest
    l.record('d', 'x', 2); // b is forgotten
    expect(
      l
        .list(2)
        .map((e) => e.peer)
        .sort(),
    ).toEqual(['a', 'c', 'd']);
    expect(l.list(2).find((e) => e.peer === 'a')).toMatchObject({ bans: 1, bannedUntil: 60_001 });
  });

  it('rejects nonsense options', () => {
    expect(() => createOffenceLedger({ threshold: 0 })).toThrow(/threshold must be positive/);
    expect(() => createOffenceLedger({ banMs: Number.NaN })).toThrow(/banMs/);
  });
});
