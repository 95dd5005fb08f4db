import {
  type Certificate,
  indexRevocations,
  type KeyChain,
  type MemberRole,
  MembershipError,
  mergeRevocations,
  type RekeyPush,
  type Revocation,
  type RevocationIndex,
  type VerifyContext,
  verifyCertificate,
  verifyKeyChain,
  verifyRekey,
  verifyRevocation,
} from '../../protocol/membership.ts';
import type { DataDir, FleetFile } from '../data-dir.ts';
import { logger } from '../logger.ts';
import { type Authority, loadAuthority, retireOldKeys } from './authority.ts';
import { FILES, type MembersFile, membershipFiles, type PendingRekeyFile } from './files.ts';

/** Where a peer stands: `member` (a valid certificate is known) or why not. */
export type Standing = 'member' | 'unknown' | 'revoked' | 'expired' | 'old-generation' | 'role';

/** One row of `vtnode members`. */
export interface MemberRow {
  peerId: string;
  roles: MemberRole[];
  /** Certificate issue and expiry times, ms since epoch (null: only its revocation is known). */
  issued: number | null;
  expires: number | null;
  /** Key generation of its certificate. */
  gen: number | null;
  /** When it was last heard from, ms since epoch. */
  lastSeen: number | null;
  revoked: boolean;
  standing: Standing;
  self: boolean;
}

export interface MembershipStateOptions {
  /** The node's data dir. */
  dataDir: DataDir;
  /** The node's peer id. */
  peerId: string;
  /** Clock, ms since epoch (tests inject one). */
  now?: () => number;
}

/**
 * What a node knows about its fleet's membership, in memory and in its data dir: the key chain, the
 * pre-shared key, its own certificate, the revocation list, the newest certificate of every member
 * it has heard of, and a pending re-key order. Every certificate in it passed verifyCertificate when
 * it entered, so `standing` is a cheap synchronous check (expiry, generation, revocation, role).
 */
export interface MembershipState {
  readonly peerId: string;
  readonly fleetId: string;
  chain(): KeyChain;
  psk(): string;
  fleet(): FleetFile;
  /** The fleet key holder's signing keys, or null on an ordinary member. */
  authority(): Authority | null;
  /** This node's certificate, or null while it waits for admission. */
  own(): Certificate | null;
  setOwn(cert: Certificate): Promise<void>;
  /** A verification context at the current time. */
  context(): VerifyContext;
  /** Verifies a certificate presented by `presenter` (it must name it) and remembers it. Throws a MembershipError. */
  accept(value: unknown, presenter: string): Promise<Certificate>;
  /** Remembers a certificate this node issued. */
  remember(cert: Certificate): void;
  standing(peerId: string, role?: MemberRole): Standing;
  /** The peer's known certificate, whatever its standing. */
  certificateOf(peerId: string): Certificate | null;
  /** Notes that the peer was heard from. */
  seen(peerId: string): void;
  revocations(): Revocation[];
  revokedIndex(): RevocationIndex;
  /** Verifies and merges revocations (invalid ones are dropped and logged); returns the new ones. */
  addRevocations(values: readonly unknown[]): Promise<Revocation[]>;
  members(): MemberRow[];
  /** Checks and saves a re-key order pushed by `from` (which must be an admin); returns it. */
  receiveRekey(push: RekeyPush, from: string): Promise<PendingRekeyFile>;
  /** Saves this node's own re-key order (on the fleet key holder that starts a rotation). */
  stageRekey(pending: PendingRekeyFile): Promise<void>;
  pendingRekey(): PendingRekeyFile | null;
  /** Applies the pending re-key order; returns what changed. */
  applyRekey(): Promise<{ psk: boolean; key: boolean }>;
  /** Saves the members file now. */
  flush(): Promise<void>;
}

/** Thrown when a data dir cannot take part in membership as it stands; the message says what to do. */
export class MembershipSetupError extends Error {}

async function loadChain(dataDir: DataDir, fleet: FleetFile): Promise<KeyChain> {
  if (fleet.keys.length === 0)
    throw new MembershipSetupError(
      `${dataDir.path('fleet.json')} holds no fleet keys: this data dir predates signed membership; ` +
        'join again with a token from `vtnode token` on the fleet-key holder',
    );
  try {
    return await verifyKeyChain(fleet.keys, fleet.fleet);
  } catch (err) {
    throw new MembershipSetupError(`${dataDir.path('fleet.json')}: ${(err as Error).message}`);
  }
}

async function checkAuthority(dataDir: DataDir, chain: KeyChain): Promise<Authority | null> {
  const authority = await loadAuthority(dataDir);
  if (!authority) return null;
  const key = authority.key(chain.current);
  if (!key.publicKey.equals(chain.keys.get(chain.current)))
    throw new MembershipSetupError(
      `${dataDir.path(FILES.fleetKey)}: its generation ${chain.current} key is not the fleet's (fleet.json)`,
    );
  return authority;
}

/** Loads the membership state of a data dir, applying a re-key order whose switch time has passed. */
export async function loadMembershipState(options: MembershipStateOptions): Promise<MembershipState> {
  const { dataDir, peerId } = options;
  const now = options.now ?? Date.now;
  const log = logger('vtnode:members');
  const files = membershipFiles(dataDir);
  let fleet = await dataDir.readFleet();
  if (!fleet) throw new MembershipSetupError(`${dataDir.root} is not in a fleet`);
  let chain = await loadChain(dataDir, fleet);
  let authority = await checkAuthority(dataDir, chain);
  let own = await files.readCertificate();
  let pending = await files.readRekey();
  let revocations: Revocation[] = [];
  let index = indexRevocations([]);
  const known = new Map<string, MembersFile['members'][string]>(Object.entries(await files.readMembers()));
  let dirty = false;

  const context = (): VerifyContext => ({ chain, now: now(), revoked: index });
  // File writes run one at a time, each writing the state as it is when its turn comes: two changes
  // that finish together (a gossiped revocation and a hello's) cannot leave the older one on disk.
  let saving: Promise<void> = Promise.resolve();
  const save = (write: () => Promise<void>): Promise<void> => {
    saving = saving.catch(() => {}).then(write);
    return saving;
  };
  const saveRevocations = () => save(() => files.writeRevocations(revocations));

  // Revocations from disk are verified again (a list from an older key chain, a hand-edited file).
  {
    const loaded = await files.readRevocations();
    const good: Revocation[] = [];
    for (const r of loaded) {
      try {
        good.push(await verifyRevocation(r, context()));
      } catch (err) {
        log.warn(`${dataDir.path(FILES.revocations)}: dropped an entry: ${(err as Error).message}`);
      }
    }
    revocations = mergeRevocations([], good).entries;
    index = indexRevocations(revocations);
  }

  const standingOf = (cert: Certificate | undefined, role?: MemberRole): Standing => {
    if (!cert) return 'unknown';
    if (index.peers.has(cert.peerId)) return 'revoked';
    if (cert.gen !== chain.current) return 'old-generation';
    if (cert.exp <= now()) return 'expired';
    if (role && !cert.roles.includes(role)) return 'role';
    return 'member';
  };

  // Certificates issued under a key generation that takes over at the next switch.
  const staged = new Map<string, Certificate>();
  const remember = (cert: Certificate, seen: boolean) => {
    if (cert.gen > chain.current) {
      staged.set(cert.peerId, cert);
      return;
    }
    const had = known.get(cert.peerId);
    const newer = !had || had.cert.gen < cert.gen || (had.cert.gen === cert.gen && had.cert.exp < cert.exp);
    known.set(cert.peerId, {
      cert: newer ? cert : had.cert,
      lastSeen: seen ? now() : (had?.lastSeen ?? null),
    });
    dirty = true;
  };

  const state: MembershipState = {
    peerId,
    fleetId: fleet.fleet,
    chain: () => chain,
    psk: () => fleet!.psk,
    fleet: () => fleet!,
    authority: () => authority,
    own: () => own,
    async setOwn(cert) {
      own = cert;
      remember(cert, true);
      await save(() => (own ? files.writeCertificate(own) : Promise.resolve()));
    },
    context,
    async accept(value, presenter) {
      const cert = await verifyCertificate(value, context(), { peerId: presenter });
      remember(cert, true);
      return cert;
    },
    remember: (cert) => remember(cert, false),
    standing: (id, role) =>
      id === peerId && own ? standingOf(own, role) : standingOf(known.get(id)?.cert, role),
    certificateOf: (id) => known.get(id)?.cert ?? null,
    seen(id) {
      const had = known.get(id);
      if (had) {
        had.lastSeen = now();
        dirty = true;
      }
    },
    revocations: () => revocations,
    revokedIndex: () => index,
    async addRevocations(values) {
      const have = new Set(revocations.map((r) => r.sig));
      const fresh: Revocation[] = [];
      for (const value of values) {
        if (have.has((value as { sig?: string }).sig ?? '')) continue;
        try {
          fresh.push(await verifyRevocation(value, context()));
        } catch (err) {
          log.warn(`ignored a revocation: ${(err as Error).message}`);
        }
      }
      if (fresh.length === 0) return [];
      const merged = mergeRevocations(revocations, fresh);
      if (merged.dropped > 0) log.warn(`revocation list full: ${merged.dropped} revocation(s) not kept`);
      const changed =
        merged.entries.some((r, i) => revocations[i]?.sig !== r.sig) ||
        merged.entries.length !== revocations.length;
      revocations = merged.entries;
      index = indexRevocations(revocations);
      if (changed) await saveRevocations();
      return merged.added;
    },
    members() {
      const ids = new Set([...known.keys(), ...index.peers, ...(own ? [peerId] : [])]);
      return [...ids].sort().map((id) => {
        const entry = id === peerId && own ? { cert: own, lastSeen: now() } : known.get(id);
        const cert = entry?.cert;
        return {
          peerId: id,
          roles: cert?.roles ?? [],
          issued: cert?.iat ?? null,
          expires: cert?.exp ?? null,
          gen: cert?.gen ?? null,
          lastSeen: entry?.lastSeen ?? null,
          revoked: index.peers.has(id),
          standing: standingOf(cert),
          self: id === peerId,
        };
      });
    },
    async receiveRekey(push, from) {
      if (standingOf(known.get(from)?.cert, 'admin') !== 'member')
        throw new MembershipError('role', `rekey order from ${from}, which does not hold the fleet key`);
      const { rekey, next } = await verifyRekey(push.rekey, { ...context(), appliedAt: fleet!.rekeyedAt });
      if (rekey.key && !push.cert)
        throw new MembershipError('malformed', 'rekey order brings a new key but no certificate under it');
      const cert = push.cert
        ? await verifyCertificate(push.cert, { ...context(), chain: next }, { peerId })
        : null;
      pending = { rekey, cert };
      await files.writeRekey(pending);
      return pending;
    },
    async stageRekey(staged) {
      pending = staged;
      await files.writeRekey(staged);
    },
    pendingRekey: () => pending,
    async applyRekey() {
      if (!pending) return { psk: false, key: false };
      const { rekey, cert } = pending;
      const keys = rekey.key ? [...chain.records, rekey.key] : [...chain.records];
      fleet = { ...fleet!, psk: rekey.psk ?? fleet!.psk, keys, rekeyedAt: rekey.iat };
      await dataDir.writeFleet(fleet);
      chain = await verifyKeyChain(keys, fleet.fleet);
      if (cert) await state.setOwn(cert);
      for (const c of staged.values()) if (c.gen === chain.current) remember(c, false);
      staged.clear();
      if (rekey.key && authority) {
        await retireOldKeys(dataDir, chain.current);
        authority = await checkAuthority(dataDir, chain);
      }
      pending = null;
      await files.removeRekey();
      log(
        'applied the rekey order: key generation %d%s',
        chain.current,
        rekey.psk ? ', new pre-shared key' : '',
      );
      return { psk: rekey.psk !== null, key: rekey.key !== null };
    },
    async flush() {
      if (!dirty) return;
      dirty = false;
      await save(() => files.writeMembers(Object.fromEntries(known)));
    },
  };

  if (pending && pending.rekey.switchAt <= now()) await state.applyRekey();
  if (own) {
    try {
      own = await verifyCertificate(own, context(), { peerId });
    } catch (err) {
      log.warn(`this node's certificate cannot be used: ${(err as Error).message}`);
      own = null;
    }
  }
  return state;
}
