import { describe, expect, it } from 'vitest';
import { createInboundGuard } from '../../node/fleet/inbound-guard.ts';

const admitted = (a: ReturnType<ReturnType<typeof createInboundGuard>['open']>): number => {
  if (!a.admit) throw new Error(`not admitted: ${a.reason}`);
  return a.id;
};

describe('inbound guard: handshakes in progress per address', () => {
  it('admits up to the cap per address, refuses the next, and frees a slot on completion or close', () => {
    const g = createInboundGuard({ maxPendingPerAddress: 3 });
    const ids = [1, 2, 3].map(() => admitted(g.open('10.0.0.9', 0)));
    expect(new Set(ids).size).toBe(3);
    expect(g.open('10.0.0.9', 1)).toEqual({ admit: false, reason: 'too-many-pending', pending: 3 });
    // Other addresses are not affected by one address's flood.
    admitted(g.open('10.0.0.1', 1));
    expect(g.pending).toBe(4);
    g.established(ids[0]!, 2);
    const again = admitted(g.open('10.0.0.9', 2));
    expect(g.open('10.0.0.9', 2)).toMatchObject({ admit: false });
    g.closed(ids[1]!, 3);
    admitted(g.open('10.0.0.9', 3));
    expect(g.pending).toBe(4);
    expect(again).not.toBe(ids[0]);
  });

  it('a completed handshake that closes later is not a strike; unknown ids are ignored', () => {
    const g = createInboundGuard({ strikes: 1 });
    const id = admitted(g.open('10.0.0.2', 0));
    g.established(id, 1);
    expect(g.closed(id, 5)).toEqual({ banned: false, abort: [] });
    expect(g.closed(999, 5)).toEqual({ banned: false, abort: [] });
    g.established(999, 5);
    expect(g.bannedUntil('10.0.0.2', 5)).toBeNull();
    expect(g.pending).toBe(0);
  });
});

describe('inbound guard: failed handshakes get an address banned', () => {
  it('bans after `strikes` failures within the window and names the connections to abort', () => {
    const g = createInboundGuard({ strikes: 3, strikeWindowMs: 1000, banMs: 5000, maxPendingPerAddress: 10 });
    const a = [0, 1, 2, 3, 4].map(() => admitted(g.open('6.6.6.6', 0)));
    expect(g.closed(a[0]!, 100)).toEqual({ banned: false, abort: [] });
    expect(g.closed(a[1]!, 200)).toEqual({ banned: false, abort: [] });
    expect(g.closed(a[2]!, 300)).toEqual({ banned: true, abort: [a[3], a[4]] });
    expect(g.bannedUntil('6.6.6.6', 300)).toBe(5300);
    expect(g.open('6.6.6.6', 5299)).toEqual({ admit: false, reason: 'banned', until: 5300 });
    // The aborted handshakes closing now do not extend the ban.
    expect(g.closed(a[3]!, 310).banned).toBe(false);
    expect(g.closed(a[4]!, 310).banned).toBe(false);
    expect(g.bannedUntil('6.6.6.6', 5300)).toBeNull();
    admitted(g.open('6.6.6.6', 5300));
    // Other addresses were never banned.
    admitted(g.open('6.6.6.7', 300));
  });

  it('forgets failures older than the window (slow, sporadic failures never ban)', () => {
    const g = createInboundGuard({ strikes: 3, strikeWindowMs: 1000 });
    for (let t = 0; t < 100_000; t += 600) {
      const id = admitted(g.open('10.1.1.1', t));
      expect(g.closed(id, t + 10).banned).toBe(false);
    }
  });

  it('doubles each further ban, up to the cap', () => {
    const g = createInboundGuard({ strikes: 1, banMs: 1000, maxBanMs: 5000 });
    let now = 0;
    const lengths: number[] = [];
    for (let i = 0; i < 5; i++) {
      const id = admitted(g.open('7.7.7.7', now));
      expect(g.closed(id, now).banned).toBe(true);
      const until = g.bannedUntil('7.7.7.7', now)!;
      lengths.push(until - now);
      now = until;
    }
    expect(lengths).toEqual([1000, 2000, 4000, 5000, 5000]);
  });
});

describe('inbound guard: an address that holds members', () => {
  it('is not banned while its grace lasts, however many of its handshakes fail (a NAT, a starved machine)', () => {
    const g = createInboundGuard({ strikes: 3, strikeWindowMs: 1000, banMs: 5000, memberGraceMs: 60_000 });
    g.established(admitted(g.open('127.0.0.1', 0)), 10);
    // A burst of timed-out handshakes from members (and anyone else) behind that address.
    for (let i = 0; i < 50; i++)
      expect(g.closed(admitted(g.open('127.0.0.1', 100 + i)), 200 + i).banned).toBe(false);
    expect(g.bannedUntil('127.0.0.1', 300)).toBeNull();
    // A stranger's address beside it is banned as before.
    const s = [0, 1, 2].map(() => admitted(g.open('6.6.6.6', 100)));
    expect(s.map((id) => g.closed(id, 200).banned)).toEqual([false, false, true]);
  });

  it('still holds it to the limit of handshakes in progress', () => {
    const g = createInboundGuard({ maxPendingPerAddress: 2, memberGraceMs: 60_000 });
    g.established(admitted(g.open('10.0.0.1', 0)), 0);
    admitted(g.open('10.0.0.1', 1));
    admitted(g.open('10.0.0.1', 1));
    expect(g.open('10.0.0.1', 1)).toMatchObject({ admit: false, reason: 'too-many-pending' });
  });

  it('counts failures again once the grace is over', () => {
    const g = createInboundGuard({ strikes: 2, strikeWindowMs: 1000, banMs: 5000, memberGraceMs: 1000 });
    g.established(admitted(g.open('10.0.0.2', 0)), 0);
    expect(g.closed(admitted(g.open('10.0.0.2', 500)), 600).banned).toBe(false);
    expect(g.closed(admitted(g.open('10.0.0.2', 500)), 700).banned).toBe(false);
    expect(g.closed(admitted(g.open('10.0.0.2', 1500)), 1600).banned).toBe(false);
    expect(g.closed(admitted(g.open('10.0.0.2', 1500)), 1700).banned).toBe(true);
    expect(() => createInboundGuard({ memberGraceMs: 0 })).toThrow(/memberGraceMs/);
  });
});

describe('inbound guard: bounded memory and options', () => {
  it('remembers at most maxAddresses, forgetting the stalest idle address, unbanned ones first', () => {
    const g = createInboundGuard({ maxAddresses: 3, strikes: 1, banMs: 1e6 });
    g.closed(admitted(g.open('1.0.0.1', 0)), 0); // banned, idle
    g.established(admitted(g.open('1.0.0.2', 1)), 1); // idle, unbanned
    admitted(g.open('1.0.0.3', 2)); // handshake in progress
    // A fourth address: the idle unbanned one goes, the ban stays.
    g.established(admitted(g.open('1.0.0.4', 3)), 3);
    expect(g.bannedUntil('1.0.0.1', 10)).not.toBeNull();
    // A fifth: 1.0.0.4 is now the stalest idle unbanned one.
    admitted(g.open('1.0.0.5', 4));
    expect(g.bannedUntil('1.0.0.1', 10)).not.toBeNull();
    // A sixth while the others are busy: only the banned idle address can go.
    admitted(g.open('1.0.0.6', 5));
    expect(g.bannedUntil('1.0.0.1', 10)).toBeNull();
    // An address in its handshake is never forgotten: its cap still holds.
    const capped = createInboundGuard({ maxAddresses: 1, maxPendingPerAddress: 1 });
    admitted(capped.open('9.9.9.9', 0));
    admitted(capped.open('9.9.9.8', 0));
    expect(capped.open('9.9.9.9', 1)).toMatchObject({ admit: false, reason: 'too-many-pending' });
  });

  it('rejects nonsensical options, naming them', () => {
    expect(() => createInboundGuard({ maxPendingPerAddress: 0 })).toThrow(/maxPendingPerAddress/);
    expect(() => createInboundGuard({ strikes: 1.5 })).toThrow(/strikes must be a positive integer/);
    expect(() => createInboundGuard({ banMs: Number.NaN })).toThrow(/banMs/);
    expect(() => createInboundGuard({ strikeWindowMs: -1 })).toThrow(/strikeWindowMs/);
    expect(() => createInboundGuard({ maxBanMs: Number.POSITIVE_INFINITY })).toThrow(/maxBanMs/);
    expect(() => createInboundGuard({ maxAddresses: 0 })).toThrow(/maxAddresses/);
  });
});
