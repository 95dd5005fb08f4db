/**
 * Admission of inbound TCP connections before their handshake, pure (no I/O, the clock is an
 * argument). A fleet uses a pre-shared key, so a stranger's connection never completes the
 * pnet/noise handshake, but until it fails it holds one of the host's pending-handshake slots.
 * One address may hold only a few of them at once (a flood from one address cannot fill the
 * host's slots and lock members out), and an address whose handshakes keep failing is refused
 * outright for a while (a ban that doubles each time, up to a cap).
 *
 * An address from which a handshake succeeded (a holder of the fleet key) is never banned for a
 * while after: members behind one NAT share an address, and on a starved machine members'
 * handshakes time out in bursts. Banning the address then locked every member out and turned a
 * slow moment into an outage (the 20,000-sample load drill on a loaded 2-core machine: the
 * submitter banned 127.0.0.1, and its jobs on every worker were lost). Such an address is still held
 * to the per-address limit of handshakes in progress, so a stranger behind a member's NAT cannot
 * take the host's slots.
 */

export interface InboundGuardOptions {
  /** Handshakes one address may have in progress at once; further connections are refused (default 16). */
  maxPendingPerAddress?: number;
  /** Failed handshakes from one address within `strikeWindowMs` that get it banned (default 20). */
  strikes?: number;
  /** Window the failed handshakes are counted in, ms (default 10 s). */
  strikeWindowMs?: number;
  /** First ban of an address, ms; each further ban doubles it (default 30 s). */
  banMs?: number;
  /** Longest ban, ms (default 10 min). */
  maxBanMs?: number;
  /** Addresses remembered at most (strikes, bans); the stalest are forgotten first (default 10,000). */
  maxAddresses?: number;
  /** After a handshake from an address succeeds, its failures do not count toward a ban for this long, ms (default 1 h). */
  memberGraceMs?: number;
}

/** Whether a new inbound connection may start its handshake. */
export type Admission =
  | { admit: true; id: number }
  | { admit: false; reason: 'banned'; until: number }
  | { admit: false; reason: 'too-many-pending'; pending: number };

/** What the closing of a connection did. */
export interface Closure {
  /** True when this failed handshake got its address banned. */
  banned: boolean;
  /** Connections of that address still in their handshake, to abort now (empty unless banned). */
  abort: number[];
}

export interface InboundGuard {
  /** A connection from `address` asks to start its handshake at `now`. */
  open(address: string, now: number): Admission;
  /** Connection `id` completed its handshake at `now` (the peer holds the fleet key): it no longer counts, and its address is not banned for the grace period. */
  established(id: number, now: number): void;
  /** Connection `id` closed; before `established`, that is a failed handshake (a strike). */
  closed(id: number, now: number): Closure;
  /** The end of the address's ban, or null when it is not banned at `now`. */
  bannedUntil(address: string, now: number): number | null;
  /** Handshakes in progress, over all addresses. */
  readonly pending: number;
}

interface AddressState {
  pending: Set<number>;
  /** Times of recent failed handshakes, oldest first. */
  strikes: number[];
  bannedUntil: number;
  /** Bans so far (the next lasts banMs × 2^bans). */
  bans: number;
  /** Until when failed handshakes are not strikes (a handshake from here succeeded), epoch ms. */
  graceUntil: number;
  lastSeen: number;
}

function positive(name: string, value: number, integer: boolean): number {
  if (!(value > 0) || !Number.isFinite(value) || (integer && !Number.isInteger(value)))
    throw new RangeError(`${name} must be a positive ${integer ? 'integer' : 'number'}, got ${value}`);
  return value;
}

export function createInboundGuard(options: InboundGuardOptions = {}): InboundGuard {
  const maxPending = positive('maxPendingPerAddress', options.maxPendingPerAddress ?? 16, true);
  const strikes = positive('strikes', options.strikes ?? 20, true);
  const window = positive('strikeWindowMs', options.strikeWindowMs ?? 10_000, false);
  const banMs = positive('banMs', options.banMs ?? 30_000, false);
  const maxBanMs = positive('maxBanMs', options.maxBanMs ?? 600_000, false);
  const maxAddresses = positive('maxAddresses', options.maxAddresses ?? 10_000, true);
  const memberGraceMs = positive('memberGraceMs', options.memberGraceMs ?? 3_600_000, false);
  const addresses = new Map<string, AddressState>();
  const connections = new Map<number, string>();
  let nextId = 1;

  const stateOf = (address: string, now: number): AddressState => {
    let state = addresses.get(address);
    if (!state) {
      state = { pending: new Set(), strikes: [], bannedUntil: 0, bans: 0, graceUntil: 0, lastSeen: now };
      addresses.set(address, state);
      if (addresses.size > maxAddresses) forgetStalest(address, now);
    }
    state.lastSeen = now;
    return state;
  };

  /**
   * Drops the least recently seen address without connections in progress, unbanned ones first
   * (bounded memory: a flood from very many addresses cannot grow the table).
   */
  const forgetStalest = (keep: string, now: number) => {
    let stalest: string | null = null;
    let best: [number, number] = [2, Number.POSITIVE_INFINITY];
    for (const [address, state] of addresses) {
      if (state.pending.size > 0 || address === keep) continue;
      const key: [number, number] = [state.bannedUntil > now ? 1 : 0, state.lastSeen];
      if (key[0] < best[0] || (key[0] === best[0] && key[1] < best[1])) {
        best = key;
        stalest = address;
      }
    }
    if (stalest !== null) addresses.delete(stalest);
  };

  const release = (id: number): AddressState | null => {
    const address = connections.get(id);
    if (address === undefined) return null;
    connections.delete(id);
    const state = addresses.get(address);
    state?.pending.delete(id);
    return state ?? null;
  };

  return {
    open(address, now) {
      const state = stateOf(address, now);
      if (state.bannedUntil > now) return { admit: false, reason: 'banned', until: state.bannedUntil };
      if (state.pending.size >= maxPending)
        return { admit: false, reason: 'too-many-pending', pending: state.pending.size };
      const id = nextId++;
      state.pending.add(id);
      connections.set(id, address);
      return { admit: true, id };
    },
    established(id, now) {
      const state = release(id);
      if (!state) return;
      state.lastSeen = now;
      state.graceUntil = now + memberGraceMs;
      state.strikes = [];
    },
    closed(id, now) {
      const state = release(id);
      if (!state) return { banned: false, abort: [] };
      state.lastSeen = now;
      if (state.graceUntil > now) return { banned: false, abort: [] };
      while (state.strikes.length > 0 && state.strikes[0]! <= now - window) state.strikes.shift();
      state.strikes.push(now);
      if (state.strikes.length < strikes || state.bannedUntil > now) return { banned: false, abort: [] };
      state.bannedUntil = now + Math.min(maxBanMs, banMs * 2 ** state.bans);
      state.bans += 1;
      state.strikes = [];
      return { banned: true, abort: [...state.pending] };
    },
    bannedUntil(address, now) {
      const until = addresses.get(address)?.bannedUntil ?? 0;
      return until > now ? until : null;
    },
    get pending() {
      return connections.size;
    },
  };
}
