import { publicKeyFromProtobuf, publicKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey, PublicKey } from '@libp2p/interface';
import { z } from 'zod';
import { canonicalJson } from './canonical.ts';
import { FleetId, Psk } from './fleet-id.ts';
import { ParseError, parseWith } from './parse.ts';

/**
 * Fleet membership, pure: the signed records (fleet keys, invitations, certificates, revocations,
 * re-key orders), their canonical encoding, signing, and every check a node makes before it trusts
 * one. No I/O and no clock: the caller passes `now`. docs/security.md explains the design.
 */

/** Every signature covers this prefix and the canonical JSON of the record less its `sig`. */
const DOMAIN = 'vtnode/membership/1\n';

/** What a member may do: worker (run jobs, gossip digests), submitter (place jobs), collector (fetch bodies and logs), admin (holds the fleet key). */
export const MemberRole = z.enum(['worker', 'submitter', 'collector', 'admin']);
export type MemberRole = z.infer<typeof MemberRole>;
/** Roles an invitation can grant (admin comes only with the fleet key). */
export const InvitableRole = z.enum(['worker', 'submitter', 'collector']);
export type InvitableRole = z.infer<typeof InvitableRole>;
export const DEFAULT_ROLES: InvitableRole[] = ['worker', 'submitter', 'collector'];

/** Most revocations a fleet keeps (a hello carries them all). */
export const MAX_REVOCATIONS = 2048;
/** Allowed clock difference for "issued in the future", ms. */
export const DEFAULT_SKEW_MS = 5 * 60_000;

const Time = z.number().int().positive().max(8.64e15);
const Gen = z.number().int().min(1).max(1_000_000);
const Signature = z.string().regex(/^[A-Za-z0-9+/]{86}==$/, 'expected a 64-byte signature in base64');
const PublicKeyText = z
  .string()
  .max(128)
  .regex(/^[A-Za-z0-9+/]+={0,2}$/, 'expected a public key in base64');
/** A libp2p peer id in its base58 text form. */
export const PeerIdText = z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{46,64}$/, 'expected a base58 peer id');
/** A random 16-byte id: an invitation's nonce. */
export const Nonce = z.string().regex(/^[0-9a-f]{32}$/, 'expected 32 hex digits');

function roleList<T extends z.ZodType<string>>(role: T, max: number) {
  return z
    .array(role)
    .min(1)
    .max(max)
    .refine((r) => new Set(r).size === r.length, 'a role is listed twice');
}

/** One generation of the fleet's signing key. Gen 1 signs itself; gen n is signed by gen n−1. */
export const FleetKey = z.strictObject({
  v: z.literal(1),
  type: z.literal('fleet-key'),
  /** Fleet id. */
  fleet: FleetId,
  /** Key generation, from 1. */
  gen: Gen,
  /** The Ed25519 public key, libp2p protobuf encoding, base64. */
  publicKey: PublicKeyText,
  /** Creation time, ms since epoch. */
  iat: Time,
  sig: Signature,
});
export type FleetKey = z.infer<typeof FleetKey>;

/** What a join token carries: the right to ask for a certificate, until `exp`. */
export const Invitation = z
  .strictObject({
    v: z.literal(1),
    type: z.literal('invitation'),
    fleet: FleetId,
    /** Generation of the fleet key that signed it. */
    gen: Gen,
    /** Roles the certificate will grant. */
    roles: roleList(InvitableRole, 3),
    /** Issue and expiry times, ms since epoch. */
    iat: Time,
    exp: Time,
    /** Names the invitation (for `vtnode members` and for revoking a leaked token). */
    nonce: Nonce,
    sig: Signature,
  })
  .refine((i) => i.exp > i.iat, { message: 'expires before it is issued', path: ['exp'] });
export type Invitation = z.infer<typeof Invitation>;

/** A member's proof of membership: signed by the fleet key, bound to one peer id. */
export const Certificate = z
  .strictObject({
    v: z.literal(1),
    type: z.literal('certificate'),
    fleet: FleetId,
    /** Generation of the fleet key that signed it: after a rotation, only the newest counts. */
    gen: Gen,
    /** The member's libp2p peer id (the connection's authenticated identity must equal it). */
    peerId: PeerIdText,
    roles: roleList(MemberRole, 4),
    /** Issue and expiry times, ms since epoch. */
    iat: Time,
    exp: Time,
    /** Nonce of the invitation it was first admitted with (null for a fleet-key holder's own). */
    invitation: Nonce.nullable(),
    sig: Signature,
  })
  .refine((c) => c.exp > c.iat, { message: 'expires before it is issued', path: ['exp'] });
export type Certificate = z.infer<typeof Certificate>;

/** Revokes a member (by peer id) or an invitation (by nonce), forever. Signed by any generation. */
export const Revocation = z.strictObject({
  v: z.literal(1),
  type: z.literal('revocation'),
  fleet: FleetId,
  gen: Gen,
  kind: z.enum(['peer', 'invitation']),
  /** The revoked peer id, or invitation nonce. */
  id: z.union([PeerIdText, Nonce]),
  /** When it was revoked, ms since epoch. */
  at: Time,
  sig: Signature,
});
export type Revocation = z.infer<typeof Revocation>;

/**
 * A re-key order from a fleet-key holder: a new signing key generation and/or a new pre-shared key,
 * both taking effect at `switchAt`. Signed by the current generation.
 */
export const Rekey = z
  .strictObject({
    v: z.literal(1),
    type: z.literal('rekey'),
    fleet: FleetId,
    gen: Gen,
    /** The next key generation (signed by the current one), or null to keep the signing key. */
    key: FleetKey.nullable(),
    /** The next pre-shared key, or null to keep it. */
    psk: Psk.nullable(),
    /** When every node switches, ms since epoch. */
    switchAt: Time,
    iat: Time,
    sig: Signature,
  })
  .refine((r) => r.key !== null || r.psk !== null, { message: 'changes nothing', path: ['key'] });
export type Rekey = z.infer<typeof Rekey>;

export type MembershipErrorCode =
  | 'malformed'
  | 'fleet'
  | 'chain'
  | 'unknown-key'
  | 'old-generation'
  | 'signature'
  | 'expired'
  | 'not-yet-valid'
  | 'revoked'
  | 'peer'
  | 'role'
  | 'stale';

/** A record that must not be trusted; `code` says why, the message names the record and the problem. */
export class MembershipError extends Error {
  readonly code: MembershipErrorCode;
  constructor(code: MembershipErrorCode, message: string) {
    super(message);
    this.name = 'MembershipError';
    this.code = code;
  }
}

// ── encoding and signatures ────────────────────────────────────────────────────────────────────

/** The bytes a record's signature covers: DOMAIN + canonical JSON of every field but `sig`. */
export function signingBytes(record: object): Uint8Array {
  const { sig: _sig, ...rest } = record as Record<string, unknown>;
  return new TextEncoder().encode(DOMAIN + canonicalJson(rest));
}

async function signRecord<T extends { sig: string }>(key: PrivateKey, unsigned: Omit<T, 'sig'>): Promise<T> {
  const sig = await key.sign(signingBytes(unsigned));
  return { ...unsigned, sig: Buffer.from(sig).toString('base64') } as unknown as T;
}

async function signatureHolds(key: PublicKey, record: { sig: string }): Promise<boolean> {
  try {
    return await key.verify(signingBytes(record), Buffer.from(record.sig, 'base64'));
  } catch {
    return false;
  }
}

/** A public key as records carry it: protobuf, base64. */
export function encodePublicKey(key: PublicKey): string {
  return Buffer.from(publicKeyToProtobuf(key)).toString('base64');
}

/** The Ed25519 key of a record's `publicKey` field; throws a MembershipError naming `what`. */
export function decodePublicKey(text: string, what: string): PublicKey {
  let key: PublicKey;
  try {
    key = publicKeyFromProtobuf(Buffer.from(text, 'base64'));
  } catch (err) {
    throw new MembershipError(
      'malformed',
      `${what}: publicKey is not a libp2p public key (${(err as Error).message})`,
    );
  }
  if (key.type !== 'Ed25519')
    throw new MembershipError('malformed', `${what}: publicKey is ${key.type}, not Ed25519`);
  return key;
}

// ── builders (the fleet-key holder's side) ─────────────────────────────────────────────────────

type Unsigned<T> = Omit<T, 'v' | 'type' | 'sig'>;

/** The first generation of a fleet's key: signed by itself. */
export function genesisKey(key: PrivateKey, fleet: string, now: number): Promise<FleetKey> {
  return signRecord<FleetKey>(key, {
    v: 1,
    type: 'fleet-key',
    fleet,
    gen: 1,
    publicKey: encodePublicKey(key.publicKey),
    iat: now,
  });
}

/** Generation `gen` of the fleet key, `next`, endorsed by the previous generation's key. */
export function successorKey(
  previous: PrivateKey,
  next: PrivateKey,
  fields: { fleet: string; gen: number; now: number },
): Promise<FleetKey> {
  return signRecord<FleetKey>(previous, {
    v: 1,
    type: 'fleet-key',
    fleet: fields.fleet,
    gen: fields.gen,
    publicKey: encodePublicKey(next.publicKey),
    iat: fields.now,
  });
}

export function signInvitation(key: PrivateKey, fields: Unsigned<Invitation>): Promise<Invitation> {
  return signRecord<Invitation>(key, { v: 1, type: 'invitation', ...fields });
}
export function signCertificate(key: PrivateKey, fields: Unsigned<Certificate>): Promise<Certificate> {
  return signRecord<Certificate>(key, { v: 1, type: 'certificate', ...fields });
}
export function signRevocation(key: PrivateKey, fields: Unsigned<Revocation>): Promise<Revocation> {
  return signRecord<Revocation>(key, { v: 1, type: 'revocation', ...fields });
}
export function signRekey(key: PrivateKey, fields: Unsigned<Rekey>): Promise<Rekey> {
  return signRecord<Rekey>(key, { v: 1, type: 'rekey', ...fields });
}

// ── the key chain ──────────────────────────────────────────────────────────────────────────────

/** The fleet's verified signing keys, generation 1 to `current`. */
export interface KeyChain {
  fleet: string;
  /** Generation 1's public key: the fleet's identity (two fleets of one name differ here). */
  genesis: string;
  /** The newest generation: invitations, certificates and re-key orders must be signed by it. */
  current: number;
  /** Public key per generation. */
  keys: ReadonlyMap<number, PublicKey>;
  /** The records, oldest first. */
  records: readonly FleetKey[];
}

function parseRecord<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  try {
    return parseWith(schema, value, what);
  } catch (err) {
    if (err instanceof ParseError) throw new MembershipError('malformed', err.message);
    throw err;
  }
}

/** Checks a chain of key records: gen 1 self-signed, every later gen signed by the one before. */
export async function verifyKeyChain(value: unknown, expectFleet?: string): Promise<KeyChain> {
  const records = parseRecord(z.array(FleetKey).min(1).max(1024), value, 'fleet key chain');
  const fleet = records[0]!.fleet;
  if (expectFleet !== undefined && fleet !== expectFleet)
    throw new MembershipError('fleet', `fleet key chain: of fleet "${fleet}", not "${expectFleet}"`);
  const keys = new Map<number, PublicKey>();
  for (const [i, record] of records.entries()) {
    const what = `fleet key generation ${record.gen}`;
    if (record.gen !== i + 1)
      throw new MembershipError(
        'chain',
        `fleet key chain: entry ${i} is generation ${record.gen}, expected ${i + 1}`,
      );
    if (record.fleet !== fleet)
      throw new MembershipError('fleet', `${what}: of fleet "${record.fleet}", not "${fleet}"`);
    const key = decodePublicKey(record.publicKey, what);
    const signer = i === 0 ? key : keys.get(i)!;
    if (!(await signatureHolds(signer, record)))
      throw new MembershipError('chain', `${what}: not signed by ${i === 0 ? 'itself' : `generation ${i}`}`);
    keys.set(record.gen, key);
  }
  return { fleet, genesis: records[0]!.publicKey, current: records.length, keys, records };
}

// ── checks ─────────────────────────────────────────────────────────────────────────────────────

/** Revoked peers and invitations, for lookups. */
export interface RevocationIndex {
  peers: ReadonlySet<string>;
  invitations: ReadonlySet<string>;
}

export interface VerifyContext {
  /** The fleet's verified keys. */
  chain: KeyChain;
  /** Current time, ms since epoch. */
  now: number;
  /** Revoked peers and invitations (none when absent). */
  revoked?: RevocationIndex;
  /** Allowed clock difference for records issued "in the future", ms (default DEFAULT_SKEW_MS). */
  skewMs?: number;
}

/** Fleet, generation and signature of a parsed record; `currentOnly` refuses older generations. */
async function checkSignature(
  record: { fleet: string; gen: number; sig: string },
  what: string,
  ctx: VerifyContext,
  currentOnly: boolean,
): Promise<void> {
  const { chain } = ctx;
  if (record.fleet !== chain.fleet)
    throw new MembershipError('fleet', `${what}: of fleet "${record.fleet}", not "${chain.fleet}"`);
  const key = chain.keys.get(record.gen);
  if (!key)
    throw new MembershipError(
      'unknown-key',
      `${what}: signed by fleet key generation ${record.gen}, which this node does not know (it knows 1-${chain.current})`,
    );
  if (currentOnly && record.gen < chain.current)
    throw new MembershipError(
      'old-generation',
      `${what}: signed by fleet key generation ${record.gen}, replaced by generation ${chain.current}`,
    );
  if (!(await signatureHolds(key, record)))
    throw new MembershipError('signature', `${what}: the signature does not match (forged or altered)`);
}

function checkWindow(record: { iat: number; exp: number }, what: string, ctx: VerifyContext): void {
  const skew = ctx.skewMs ?? DEFAULT_SKEW_MS;
  if (record.iat > ctx.now + skew)
    throw new MembershipError(
      'not-yet-valid',
      `${what}: issued at ${new Date(record.iat).toISOString()}, in the future (check this machine's clock)`,
    );
  if (record.exp <= ctx.now)
    throw new MembershipError('expired', `${what}: expired at ${new Date(record.exp).toISOString()}`);
}

/** Checks an invitation: signed by the current fleet key, within its validity, not revoked. */
export async function verifyInvitation(value: unknown, ctx: VerifyContext): Promise<Invitation> {
  const invitation = parseRecord(Invitation, value, 'invitation');
  const what = `invitation ${invitation.nonce}`;
  await checkSignature(invitation, what, ctx, true);
  checkWindow(invitation, what, ctx);
  if (ctx.revoked?.invitations.has(invitation.nonce))
    throw new MembershipError('revoked', `${what}: revoked by the fleet`);
  return invitation;
}

export interface CertificateExpectations {
  /** The peer presenting it: the certificate must name it. */
  peerId?: string;
  /** A role the holder must have. */
  role?: MemberRole;
}

/** Checks a certificate: signed by the current fleet key, within its validity, not revoked, for this peer. */
export async function verifyCertificate(
  value: unknown,
  ctx: VerifyContext,
  expect: CertificateExpectations = {},
): Promise<Certificate> {
  const cert = parseRecord(Certificate, value, 'certificate');
  const what = `certificate of ${cert.peerId}`;
  if (expect.peerId !== undefined && cert.peerId !== expect.peerId)
    throw new MembershipError('peer', `${what}: presented by ${expect.peerId}`);
  await checkSignature(cert, what, ctx, true);
  checkWindow(cert, what, ctx);
  if (ctx.revoked?.peers.has(cert.peerId))
    throw new MembershipError('revoked', `${what}: the member is revoked`);
  if (expect.role && !cert.roles.includes(expect.role))
    throw new MembershipError(
      'role',
      `${what}: roles ${cert.roles.join(', ')} do not include ${expect.role}`,
    );
  return cert;
}

/** Checks a revocation: signed by any generation of the fleet key (revocations outlive rotations). */
export async function verifyRevocation(value: unknown, ctx: VerifyContext): Promise<Revocation> {
  const revocation = parseRecord(Revocation, value, 'revocation');
  if ((revocation.kind === 'peer') !== PeerIdText.safeParse(revocation.id).success)
    throw new MembershipError(
      'malformed',
      `revocation of ${revocation.kind} ${revocation.id}: id is not a ${revocation.kind} id`,
    );
  await checkSignature(revocation, `revocation of ${revocation.kind} ${revocation.id}`, ctx, false);
  return revocation;
}

/** How long after its switch time a re-key order is still accepted, ms. */
export const REKEY_LATE_MS = 60_000;

/**
 * Checks a re-key order: signed by the current key generation, newer than the last one applied
 * (`appliedAt`, its iat), not long past its switch time; a new key must be generation current+1
 * signed by the current key. Returns the order and the chain it leads to.
 */
export async function verifyRekey(
  value: unknown,
  ctx: VerifyContext & { appliedAt: number },
): Promise<{ rekey: Rekey; next: KeyChain }> {
  const rekey = parseRecord(Rekey, value, 'rekey order');
  const what = `rekey order of ${new Date(rekey.iat).toISOString()}`;
  await checkSignature(rekey, what, ctx, true);
  if (rekey.iat <= ctx.appliedAt)
    throw new MembershipError('stale', `${what}: not newer than the last one applied`);
  if (rekey.switchAt < ctx.now - REKEY_LATE_MS)
    throw new MembershipError(
      'expired',
      `${what}: its switch time ${new Date(rekey.switchAt).toISOString()} has passed`,
    );
  if (rekey.key === null) return { rekey, next: ctx.chain };
  if (rekey.key.gen !== ctx.chain.current + 1)
    throw new MembershipError(
      'chain',
      `${what}: brings key generation ${rekey.key.gen}, expected ${ctx.chain.current + 1}`,
    );
  const next = await verifyKeyChain([...ctx.chain.records, rekey.key], ctx.chain.fleet);
  return { rekey, next };
}

// ── revocation lists ───────────────────────────────────────────────────────────────────────────

const revocationKey = (r: Revocation) => `${r.kind}:${r.id}`;

export function indexRevocations(entries: readonly Revocation[]): RevocationIndex {
  return {
    peers: new Set(entries.filter((r) => r.kind === 'peer').map((r) => r.id)),
    invitations: new Set(entries.filter((r) => r.kind === 'invitation').map((r) => r.id)),
  };
}

/**
 * Merges verified revocations into a list: a grow-only set keyed by (kind, id), so its version (the
 * number of entries) only grows and any two nodes that have seen the same revocations hold the
 * same list, whatever the order. Of two signed entries for one subject the smaller signature is
 * kept. `added` lists the subjects new to `current`; `dropped` counts entries past MAX_REVOCATIONS.
 */
export function mergeRevocations(
  current: readonly Revocation[],
  incoming: readonly Revocation[],
): { entries: Revocation[]; added: Revocation[]; dropped: number } {
  const byKey = new Map(current.map((r) => [revocationKey(r), r]));
  const added: Revocation[] = [];
  let dropped = 0;
  for (const r of incoming) {
    const key = revocationKey(r);
    const had = byKey.get(key);
    if (had) {
      if (r.sig < had.sig) byKey.set(key, r);
      continue;
    }
    if (byKey.size >= MAX_REVOCATIONS) {
      dropped++;
      continue;
    }
    byKey.set(key, r);
    added.push(r);
  }
  const entries = [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
  return { entries, added, dropped };
}

// ── admission and renewal decisions ────────────────────────────────────────────────────────────

/** The certificate fields a fleet-key holder signs for `peerId` presenting `invitation`. */
export async function admissionFor(
  invitation: unknown,
  peerId: string,
  ctx: VerifyContext,
  ttlMs: number,
): Promise<Unsigned<Certificate>> {
  const inv = await verifyInvitation(invitation, ctx);
  if (ctx.revoked?.peers.has(peerId)) throw new MembershipError('revoked', `peer ${peerId} is revoked`);
  return {
    fleet: ctx.chain.fleet,
    gen: ctx.chain.current,
    peerId,
    roles: inv.roles,
    iat: ctx.now,
    exp: ctx.now + ttlMs,
    invitation: inv.nonce,
  };
}

/** The fields of a renewed certificate: the same member and roles, a fresh validity, the current key. */
export async function renewalFor(
  current: unknown,
  peerId: string,
  ctx: VerifyContext,
  ttlMs: number,
): Promise<Unsigned<Certificate>> {
  const cert = await verifyCertificate(current, ctx, { peerId });
  return { ...withoutEnvelope(cert), gen: ctx.chain.current, iat: ctx.now, exp: ctx.now + ttlMs };
}

function withoutEnvelope(cert: Certificate): Unsigned<Certificate> {
  const { v: _v, type: _t, sig: _s, ...fields } = cert;
  return fields;
}

/** True once a third or less of a certificate's lifetime remains: time to renew it. */
export function renewalDue(cert: Pick<Certificate, 'iat' | 'exp'>, now: number): boolean {
  return now >= cert.exp - (cert.exp - cert.iat) / 3;
}

// ── wire messages ──────────────────────────────────────────────────────────────────────────────

/** /vtnode/member/1: both sides send one right after connecting; the handler answers with its own. */
export const Hello = z.strictObject({
  v: z.literal(1),
  type: z.literal('hello'),
  /** The sender's certificate (null while a joiner waits for admission). */
  cert: Certificate.nullable(),
  /** The sender's revocation list (anti-entropy: a node that missed the gossip catches up here). */
  revocations: z.array(Revocation).max(MAX_REVOCATIONS),
});
export type Hello = z.infer<typeof Hello>;

/** /vtnode/admit/1 requests: a joiner's invitation, or a member's renewal. */
export const AdmitRequest = z.discriminatedUnion('type', [
  z.strictObject({ v: z.literal(1), type: z.literal('join'), invitation: Invitation }),
  z.strictObject({ v: z.literal(1), type: z.literal('renew') }),
]);
export type AdmitRequest = z.infer<typeof AdmitRequest>;

/** /vtnode/admit/1 replies. `code` is a MembershipErrorCode, or `not-admin` from a node without the fleet key. */
export const AdmitReply = z.discriminatedUnion('type', [
  z.strictObject({ v: z.literal(1), type: z.literal('certificate'), cert: Certificate }),
  z.strictObject({
    v: z.literal(1),
    type: z.literal('refused'),
    code: z.string().max(32),
    reason: z.string().max(1000),
  }),
]);
export type AdmitReply = z.infer<typeof AdmitReply>;

/** /vtnode/rekey/1: a fleet-key holder pushes a re-key order and the member's next certificate. */
export const RekeyPush = z.strictObject({
  v: z.literal(1),
  type: z.literal('rekey'),
  rekey: Rekey,
  /** The member's certificate under the new key generation (null when only the pre-shared key changes). */
  cert: Certificate.nullable(),
});
export type RekeyPush = z.infer<typeof RekeyPush>;

export const RekeyReply = z.discriminatedUnion('type', [
  z.strictObject({ v: z.literal(1), type: z.literal('ack') }),
  z.strictObject({ v: z.literal(1), type: z.literal('refused'), reason: z.string().max(1000) }),
]);
export type RekeyReply = z.infer<typeof RekeyReply>;
