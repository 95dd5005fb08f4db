/**
 * Per-peer offence ledger for the stream protocols: a peer that keeps sending malformed, oversized
 * or truncated frames, or opens streams and never sends its request, is banned for a while (its
 * streams refused, its connections closed), each further ban twice as long. Pure: the clock is
 * passed in. Written here rather than taken from a library because libp2p 2.x has no per-protocol
 * misbehaviour scoring outside gossipsub, whose peer score covers only gossip.
 */

export interface OffenceLedgerOptions {
  /** Offences within `windowMs` that get a peer banned (default 5). */
  threshold?: number;
  /** Window over which offences count, ms (default 60 s). */
  windowMs?: number;
  /** First ban, ms; each further ban of the same peer doubles it (default 60 s). */
  banMs?: number;
  /** Longest ban, ms (default 1 h). */
  maxBanMs?: number;
  /** Peers remembered at most; the least recently offending are forgotten first (default 10,000). */
  maxPeers?: number;
}

export interface PeerOffences {
  peer: string;
  /** Offences inside the window now. */
  recent: number;
  /** Offences ever recorded (while remembered). */
  total: number;
  /** Times banned. */
  bans: number;
  /** Epoch ms the current ban ends; 0 when not banned. */
  bannedUntil: number;
  /** What the last offence was. */
  lastWhy: string;
}

export interface OffenceLedger {
  /** Records an offence; says whether the peer is banned now and whether this offence banned it. */
  record(peer: string, why: string, now: number): { banned: boolean; until: number; fresh: boolean };
  /** True while the peer's ban lasts. */
  banned(peer: string, now: number): boolean;
  /** Every remembered peer, worst first. */
  list(now: number): PeerOffences[];
}

interface Entry {
  times: number[];
  total: number;
  bans: number;
  bannedUntil: number;
  lastWhy: string;
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be positive, got ${value}`);
  return value;
}

export function createOffenceLedger(options: OffenceLedgerOptions = {}): OffenceLedger {
  const threshold = positive('threshold', options.threshold ?? 5);
  const windowMs = positive('windowMs', options.windowMs ?? 60_000);
  const banMs = positive('banMs', options.banMs ?? 60_000);
  const maxBanMs = positive('maxBanMs', options.maxBanMs ?? 3_600_000);
  const maxPeers = positive('maxPeers', options.maxPeers ?? 10_000);
  // A Map keeps insertion order: re-inserting on each offence makes the first key the stalest.
  const peers = new Map<string, Entry>();

  const recentOf = (e: Entry, now: number): number[] => e.times.filter((t) => now - t < windowMs);

  return {
    record(peer, why, now) {
      const e = peers.get(peer) ?? { times: [], total: 0, bans: 0, bannedUntil: 0, lastWhy: '' };
      peers.delete(peer);
      peers.set(peer, e);
      if (peers.size > maxPeers) peers.delete(peers.keys().next().value!);
      e.times = [...recentOf(e, now), now].slice(-threshold);
      e.total++;
      e.lastWhy = why;
      if (now < e.bannedUntil) return { banned: true, until: e.bannedUntil, fresh: false };
      if (e.times.length >= threshold) {
        e.bannedUntil = now + Math.min(maxBanMs, banMs * 2 ** Math.min(e.bans, 40));
        e.bans++;
        e.times = [];
        return { banned: true, until: e.bannedUntil, fresh: true };
      }
      return { banned: false, until: 0, fresh: false };
    },
    banned(peer, now) {
      const e = peers.get(peer);
      return e !== undefined && now < e.bannedUntil;
    },
    list(now) {
      return [...peers.entries()]
        .map(([peer, e]) => ({
          peer,
          recent: recentOf(e, now).length,
          total: e.total,
          bans: e.bans,
          bannedUntil: now < e.bannedUntil ? e.bannedUntil : 0,
          lastWhy: e.lastWhy,
        }))
        .sort((a, b) => b.bans - a.bans || b.total - a.total || a.peer.localeCompare(b.peer));
    },
  };
}
