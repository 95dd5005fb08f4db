import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  AdmitRequest,
  admissionFor,
  type Certificate,
  DEFAULT_SKEW_MS,
  type FleetKey,
  genesisKey,
  Hello,
  type Invitation,
  indexRevocations,
  type KeyChain,
  MAX_REVOCATIONS,
  MembershipError,
  type MembershipErrorCode,
  mergeRevocations,
  REKEY_LATE_MS,
  type Revocation,
  renewalDue,
  renewalFor,
  signCertificate,
  signInvitation,
  signingBytes,
  signRekey,
  signRevocation,
  successorKey,
  type VerifyContext,
  verifyCertificate,
  verifyInvitation,
  verifyKeyChain,
  verifyRekey,
  verifyRevocation,
} from '../../protocol/membership.ts';

const NOW = 1_800_000_000_000;
const HOUR = 3_600_000;
const FLEET = 'studio';

let gen1: PrivateKey;
let gen2: PrivateKey;
let stranger: PrivateKey;
let member: PrivateKey;
let memberId: string;
let otherId: string;
let records: FleetKey[];
let chain1: KeyChain;
let chain2: KeyChain;

beforeAll(async () => {
  const keys = await Promise.all([1, 2, 3, 4].map(() => generateKeyPair('Ed25519')));
  [gen1, gen2, stranger, member] = keys as [PrivateKey, PrivateKey, PrivateKey, PrivateKey];
  memberId = peerIdFromPrivateKey(member).toString();
  otherId = peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString();
  records = [
    await genesisKey(gen1, FLEET, NOW - 10 * HOUR),
    await successorKey(gen1, gen2, { fleet: FLEET, gen: 2, now: NOW - HOUR }),
  ];
  chain1 = await verifyKeyChain(records.slice(0, 1), FLEET);
  chain2 = await verifyKeyChain(records, FLEET);
});

const ctx = (chain: KeyChain, extra: Partial<VerifyContext> = {}): VerifyContext => ({
  chain,
  now: NOW,
  ...extra,
});

async function codeOf(promise: Promise<unknown>): Promise<MembershipErrorCode> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(MembershipError);
    return (err as MembershipError).code;
  }
  throw new Error('expected a MembershipError');
}

function invitationFields(overrides: Partial<Invitation> = {}) {
  return {
    fleet: FLEET,
    gen: 1,
    roles: ['worker' as const, 'submitter' as const],
    iat: NOW - HOUR,
    exp: NOW + HOUR,
    nonce: 'ab'.repeat(16),
    ...overrides,
  };
}

function certFields(overrides: Partial<Certificate> = {}) {
  return {
    fleet: FLEET,
    gen: 1,
    peerId: memberId,
    roles: ['worker' as const, 'collector' as const],
    iat: NOW - HOUR,
    exp: NOW + HOUR,
    invitation: 'ab'.repeat(16),
    ...overrides,
  };
}

const revoke = (key: PrivateKey, kind: 'peer' | 'invitation', id: string, gen = 1, fleet = FLEET) =>
  signRevocation(key, { fleet, gen, kind, id, at: NOW });

describe('canonical signing bytes', () => {
  it('cover every field but sig, whatever the key order, under a domain prefix', () => {
    const a = signingBytes({ b: 1, a: 2, sig: 'x' });
    const b = signingBytes({ a: 2, b: 1, sig: 'y' });
    expect(Buffer.from(a).toString()).toBe('vtnode/membership/1\n{"a":2,"b":1}');
    expect(a).toEqual(b);
  });
});

describe('fleet key chain', () => {
  it('verifies gen 1 (self-signed) and gen 2 (signed by gen 1); the genesis key names the fleet', () => {
    expect(chain1.current).toBe(1);
    expect(chain2.current).toBe(2);
    expect(chain2.genesis).toBe(chain1.genesis);
    expect(chain2.keys.get(2)!.equals(gen2.publicKey)).toBe(true);
  });

  it('refuses a tampered, reordered, foreign, unendorsed or malformed chain', async () => {
    expect(await codeOf(verifyKeyChain([{ ...records[0]!, iat: NOW }]))).toBe('chain');
    expect(await codeOf(verifyKeyChain([records[1]!, records[0]!]))).toBe('chain');
    expect(await codeOf(verifyKeyChain(records, 'other'))).toBe('fleet');
    // Gen 2 endorsed by a stranger instead of gen 1: a takeover attempt.
    const forged = await successorKey(stranger, gen2, { fleet: FLEET, gen: 2, now: NOW });
    expect(await codeOf(verifyKeyChain([records[0]!, forged]))).toBe('chain');
    // Gen 2 of another fleet name grafted on.
    const foreign = await successorKey(gen1, gen2, { fleet: 'other', gen: 2, now: NOW });
    expect(await codeOf(verifyKeyChain([records[0]!, foreign]))).toBe('fleet');
    expect(await codeOf(verifyKeyChain([]))).toBe('malformed');
    expect(await codeOf(verifyKeyChain([{ ...records[0]!, publicKey: 'AAAA' }]))).toBe('malformed');
    expect(await codeOf(verifyKeyChain([{ ...records[0]!, extra: 1 }]))).toBe('malformed');
  });
});

describe('invitations', () => {
  it('a valid one verifies, up to (not at) its expiry', async () => {
    const inv = await signInvitation(gen1, invitationFields());
    expect(await verifyInvitation(inv, ctx(chain1))).toEqual(inv);
    expect(await verifyInvitation(inv, ctx(chain1, { now: inv.exp - 1 }))).toEqual(inv);
    expect(await codeOf(verifyInvitation(inv, ctx(chain1, { now: inv.exp })))).toBe('expired');
    expect(await codeOf(verifyInvitation(inv, ctx(chain1, { now: inv.exp + HOUR })))).toBe('expired');
  });

  it('not yet valid beyond the allowed clock skew', async () => {
    const inv = await signInvitation(
      gen1,
      invitationFields({ iat: NOW + DEFAULT_SKEW_MS + 1, exp: NOW + 2 * HOUR }),
    );
    expect(await codeOf(verifyInvitation(inv, ctx(chain1)))).toBe('not-yet-valid');
    const near = await signInvitation(
      gen1,
      invitationFields({ iat: NOW + DEFAULT_SKEW_MS, exp: NOW + 2 * HOUR }),
    );
    expect(await verifyInvitation(near, ctx(chain1))).toEqual(near);
    expect(await codeOf(verifyInvitation(near, ctx(chain1, { skewMs: 0 })))).toBe('not-yet-valid');
  });

  it('every field is covered by the signature: an edited expiry, role, nonce or time is refused', async () => {
    const inv = await signInvitation(gen1, invitationFields());
    const edits: Partial<Invitation>[] = [
      { exp: inv.exp + 365 * 24 * HOUR },
      { iat: inv.iat - 1 },
      { roles: ['worker', 'submitter', 'collector'] },
      { roles: ['worker'] },
      { nonce: 'cd'.repeat(16) },
    ];
    for (const edit of edits)
      expect(await codeOf(verifyInvitation({ ...inv, ...edit }, ctx(chain1)))).toBe('signature');
    expect(await codeOf(verifyInvitation({ ...inv, sig: `${'A'.repeat(86)}==` }, ctx(chain1)))).toBe(
      'signature',
    );
  });

  it('wrong fleet, wrong signer, unknown or replaced generation, revoked nonce', async () => {
    expect(
      await codeOf(
        verifyInvitation(await signInvitation(gen1, invitationFields({ fleet: 'other' })), ctx(chain1)),
      ),
    ).toBe('fleet');
    expect(
      await codeOf(verifyInvitation(await signInvitation(stranger, invitationFields()), ctx(chain1))),
    ).toBe('signature');
    // Signed by the member's own key, claiming to be the fleet's.
    expect(
      await codeOf(verifyInvitation(await signInvitation(member, invitationFields()), ctx(chain1))),
    ).toBe('signature');
    const byGen2 = await signInvitation(gen2, invitationFields({ gen: 2 }));
    expect(await codeOf(verifyInvitation(byGen2, ctx(chain1)))).toBe('unknown-key');
    expect(await verifyInvitation(byGen2, ctx(chain2))).toEqual(byGen2);
    const byGen1 = await signInvitation(gen1, invitationFields());
    expect(await codeOf(verifyInvitation(byGen1, ctx(chain2)))).toBe('old-generation');
    const revoked = indexRevocations([await revoke(gen1, 'invitation', byGen1.nonce)]);
    expect(await codeOf(verifyInvitation(byGen1, ctx(chain1, { revoked })))).toBe('revoked');
  });

  it('malformed: extra field, admin role, repeated role, expiry before issue, not an object', async () => {
    const inv = await signInvitation(gen1, invitationFields());
    expect(await codeOf(verifyInvitation({ ...inv, admin: true }, ctx(chain1)))).toBe('malformed');
    expect(await codeOf(verifyInvitation({ ...inv, roles: ['admin'] }, ctx(chain1)))).toBe('malformed');
    expect(await codeOf(verifyInvitation({ ...inv, roles: ['worker', 'worker'] }, ctx(chain1)))).toBe(
      'malformed',
    );
    expect(await codeOf(verifyInvitation({ ...inv, exp: inv.iat }, ctx(chain1)))).toBe('malformed');
    expect(await codeOf(verifyInvitation('vt2.x', ctx(chain1)))).toBe('malformed');
    await expect(verifyInvitation({ ...inv, nonce: 'x' }, ctx(chain1))).rejects.toThrow(/nonce/);
  });
});

describe('certificates', () => {
  it('a valid one verifies for its peer and roles', async () => {
    const cert = await signCertificate(gen1, certFields());
    expect(await verifyCertificate(cert, ctx(chain1), { peerId: memberId, role: 'worker' })).toEqual(cert);
    expect(await verifyCertificate(cert, ctx(chain1))).toEqual(cert);
  });

  it('expired and not yet valid', async () => {
    const cert = await signCertificate(gen1, certFields());
    expect(await codeOf(verifyCertificate(cert, ctx(chain1, { now: cert.exp })))).toBe('expired');
    const future = await signCertificate(
      gen1,
      certFields({ iat: NOW + DEFAULT_SKEW_MS + 1, exp: NOW + 2 * HOUR }),
    );
    expect(await codeOf(verifyCertificate(future, ctx(chain1)))).toBe('not-yet-valid');
  });

  it('wrong fleet, wrong signer (a stranger, the member itself), presented by another peer, missing role', async () => {
    expect(
      await codeOf(
        verifyCertificate(await signCertificate(gen1, certFields({ fleet: 'other' })), ctx(chain1)),
      ),
    ).toBe('fleet');
    expect(await codeOf(verifyCertificate(await signCertificate(stranger, certFields()), ctx(chain1)))).toBe(
      'signature',
    );
    expect(await codeOf(verifyCertificate(await signCertificate(member, certFields()), ctx(chain1)))).toBe(
      'signature',
    );
    const cert = await signCertificate(gen1, certFields());
    expect(await codeOf(verifyCertificate(cert, ctx(chain1), { peerId: otherId }))).toBe('peer');
    expect(await codeOf(verifyCertificate(cert, ctx(chain1), { role: 'submitter' }))).toBe('role');
    expect(await codeOf(verifyCertificate(cert, ctx(chain1), { role: 'admin' }))).toBe('role');
  });

  it('any tampered field breaks the signature', async () => {
    const cert = await signCertificate(gen1, certFields());
    const edits: Partial<Certificate>[] = [
      { peerId: otherId },
      { roles: ['worker', 'collector', 'admin'] },
      { roles: ['collector', 'worker'] },
      { iat: cert.iat + 1 },
      { exp: cert.exp + HOUR },
      { invitation: null },
      { invitation: 'cd'.repeat(16) },
    ];
    for (const edit of edits)
      expect(await codeOf(verifyCertificate({ ...cert, ...edit }, ctx(chain1)))).toBe('signature');
  });

  it('revoked member', async () => {
    const cert = await signCertificate(gen1, certFields());
    const revoked = indexRevocations([await revoke(gen1, 'peer', memberId)]);
    expect(await codeOf(verifyCertificate(cert, ctx(chain1, { revoked }), { peerId: memberId }))).toBe(
      'revoked',
    );
    // Revoking its invitation leaves an admitted member alone.
    const invitationOnly = indexRevocations([await revoke(gen1, 'invitation', cert.invitation!)]);
    expect(await verifyCertificate(cert, ctx(chain1, { revoked: invitationOnly }))).toEqual(cert);
  });

  it('after a rotation, an old generation certificate is refused and the new one verifies', async () => {
    const old = await signCertificate(gen1, certFields());
    expect(await codeOf(verifyCertificate(old, ctx(chain2)))).toBe('old-generation');
    // Signed by the new key but claiming the old generation: the signature does not hold.
    expect(
      await codeOf(verifyCertificate(await signCertificate(gen2, certFields({ gen: 1 })), ctx(chain1))),
    ).toBe('signature');
    const renewed = await signCertificate(gen2, certFields({ gen: 2 }));
    expect(await verifyCertificate(renewed, ctx(chain2))).toEqual(renewed);
    expect(await codeOf(verifyCertificate(renewed, ctx(chain1)))).toBe('unknown-key');
  });
});

describe('revocations', () => {
  it('verify under any generation of the chain (they outlive rotations)', async () => {
    const r1 = await revoke(gen1, 'peer', memberId);
    const r2 = await revoke(gen2, 'peer', memberId, 2);
    expect(await verifyRevocation(r1, ctx(chain2))).toEqual(r1);
    expect(await verifyRevocation(r2, ctx(chain2))).toEqual(r2);
    expect(await codeOf(verifyRevocation(r2, ctx(chain1)))).toBe('unknown-key');
  });

  it('forged, tampered, foreign and mismatched ones are refused', async () => {
    const r = await revoke(gen1, 'peer', memberId);
    expect(await codeOf(verifyRevocation(await revoke(stranger, 'peer', memberId), ctx(chain1)))).toBe(
      'signature',
    );
    expect(await codeOf(verifyRevocation({ ...r, id: otherId }, ctx(chain1)))).toBe('signature');
    expect(await codeOf(verifyRevocation({ ...r, at: r.at + 1 }, ctx(chain1)))).toBe('signature');
    expect(
      await codeOf(verifyRevocation(await revoke(gen1, 'peer', memberId, 1, 'other'), ctx(chain1))),
    ).toBe('fleet');
    expect(await codeOf(verifyRevocation(await revoke(gen1, 'peer', 'ab'.repeat(16)), ctx(chain1)))).toBe(
      'malformed',
    );
    expect(await codeOf(verifyRevocation(await revoke(gen1, 'invitation', memberId), ctx(chain1)))).toBe(
      'malformed',
    );
  });

  it('merge is a grow-only set: idempotent, order-independent, one entry per subject, capped', async () => {
    const a = await revoke(gen1, 'peer', memberId);
    const a2 = await signRevocation(gen1, { fleet: FLEET, gen: 1, kind: 'peer', id: memberId, at: NOW + 5 });
    const b = await revoke(gen1, 'peer', otherId);
    const c = await revoke(gen1, 'invitation', 'ef'.repeat(16));
    const one = mergeRevocations(mergeRevocations([], [a, b]).entries, [c, a2]);
    const two = mergeRevocations(mergeRevocations([], [c, a2]).entries, [b, a]);
    expect(one.entries).toEqual(two.entries);
    expect(one.entries).toHaveLength(3);
    expect(one.entries.find((r) => r.id === memberId)!.sig).toBe([a.sig, a2.sig].sort()[0]);
    expect(one.added.map((r) => r.id)).toEqual([c.id]);
    const again = mergeRevocations(one.entries, [a, b, c, a2]);
    expect(again.entries).toEqual(one.entries);
    expect(again.added).toEqual([]);
    const index = indexRevocations(one.entries);
    expect([...index.peers].sort()).toEqual([memberId, otherId].sort());
    expect([...index.invitations]).toEqual([c.id]);
  });

  it('the list stops at MAX_REVOCATIONS and says how many it dropped', async () => {
    const base = await revoke(gen1, 'invitation', '00'.repeat(16));
    const full: Revocation[] = Array.from({ length: MAX_REVOCATIONS }, (_, i) => ({
      ...base,
      id: i.toString(16).padStart(32, '0'),
    }));
    const merged = mergeRevocations(full, [await revoke(gen1, 'peer', memberId)]);
    expect(merged.entries).toHaveLength(MAX_REVOCATIONS);
    expect(merged.dropped).toBe(1);
  });
});

describe('re-key orders', () => {
  const rekeyFields = (overrides: Record<string, unknown> = {}) => ({
    fleet: FLEET,
    gen: 1,
    key: null,
    psk: 'f'.repeat(64),
    switchAt: NOW + 30_000,
    iat: NOW,
    ...overrides,
  });

  it('a new psk, a new key generation, or both', async () => {
    const pskOnly = await signRekey(gen1, rekeyFields());
    const got = await verifyRekey(pskOnly, { ...ctx(chain1), appliedAt: 0 });
    expect(got.next).toBe(chain1);
    const keyed = await signRekey(gen1, rekeyFields({ key: records[1], psk: null }));
    const next = (await verifyRekey(keyed, { ...ctx(chain1), appliedAt: 0 })).next;
    expect(next.current).toBe(2);
    expect(next.genesis).toBe(chain1.genesis);
  });

  it('refuses stale, late, forged, out-of-order and empty orders', async () => {
    const base = { ...ctx(chain1), appliedAt: 0 };
    const order = await signRekey(gen1, rekeyFields());
    expect(await codeOf(verifyRekey(order, { ...base, appliedAt: NOW }))).toBe('stale');
    expect(await codeOf(verifyRekey(order, { ...base, now: order.switchAt + REKEY_LATE_MS + 1 }))).toBe(
      'expired',
    );
    expect(await codeOf(verifyRekey(await signRekey(stranger, rekeyFields()), base))).toBe('signature');
    expect(await codeOf(verifyRekey({ ...order, psk: 'e'.repeat(64) }, base))).toBe('signature');
    // A key of generation 3 on a chain at 1, and a gen-2 key not endorsed by gen 1.
    const gen3 = { ...records[1]!, gen: 3 };
    expect(await codeOf(verifyRekey(await signRekey(gen1, rekeyFields({ key: gen3 })), base))).toBe('chain');
    const rogueKey = await successorKey(stranger, gen2, { fleet: FLEET, gen: 2, now: NOW });
    expect(await codeOf(verifyRekey(await signRekey(gen1, rekeyFields({ key: rogueKey })), base))).toBe(
      'chain',
    );
    expect(await codeOf(verifyRekey(await signRekey(gen1, rekeyFields({ psk: null })), base))).toBe(
      'malformed',
    );
    // After the rotation, an order signed by the replaced generation.
    expect(await codeOf(verifyRekey(order, { ...ctx(chain2), appliedAt: 0 }))).toBe('old-generation');
  });
});

describe('admission and renewal', () => {
  it('an invitation gives the presenting peer a certificate with its roles, from now', async () => {
    const inv = await signInvitation(gen1, invitationFields());
    const fields = await admissionFor(inv, memberId, ctx(chain1), 10 * HOUR);
    expect(fields).toEqual({
      fleet: FLEET,
      gen: 1,
      peerId: memberId,
      roles: inv.roles,
      iat: NOW,
      exp: NOW + 10 * HOUR,
      invitation: inv.nonce,
    });
    const cert = await signCertificate(gen1, fields);
    expect(await verifyCertificate(cert, ctx(chain1), { peerId: memberId })).toEqual(cert);
  });

  it('refuses a revoked peer, an expired or tampered invitation', async () => {
    const inv = await signInvitation(gen1, invitationFields());
    const revoked = indexRevocations([await revoke(gen1, 'peer', memberId)]);
    expect(await codeOf(admissionFor(inv, memberId, ctx(chain1, { revoked }), HOUR))).toBe('revoked');
    expect(await codeOf(admissionFor(inv, memberId, ctx(chain1, { now: inv.exp }), HOUR))).toBe('expired');
    expect(await codeOf(admissionFor({ ...inv, exp: inv.exp * 2 }, memberId, ctx(chain1), HOUR))).toBe(
      'signature',
    );
  });

  it('renewal keeps member and roles, moves the validity, and refuses anyone else or a revoked member', async () => {
    const cert = await signCertificate(gen1, certFields());
    const later = NOW + 30 * 60_000;
    const fields = await renewalFor(cert, memberId, ctx(chain1, { now: later }), HOUR);
    expect(fields).toMatchObject({
      peerId: memberId,
      roles: cert.roles,
      iat: later,
      exp: later + HOUR,
      gen: 1,
    });
    expect(await codeOf(renewalFor(cert, otherId, ctx(chain1), HOUR))).toBe('peer');
    const revoked = indexRevocations([await revoke(gen1, 'peer', memberId)]);
    expect(await codeOf(renewalFor(cert, memberId, ctx(chain1, { revoked }), HOUR))).toBe('revoked');
    expect(await codeOf(renewalFor(cert, memberId, ctx(chain1, { now: cert.exp }), HOUR))).toBe('expired');
    expect(await codeOf(renewalFor(null, memberId, ctx(chain1), HOUR))).toBe('malformed');
  });

  it('renewal is due once a third of the lifetime is left', () => {
    const c = { iat: 0, exp: 3000 };
    expect(renewalDue(c, 1999)).toBe(false);
    expect(renewalDue(c, 2000)).toBe(true);
    expect(renewalDue(c, 5000)).toBe(true);
  });
});

describe('wire messages', () => {
  it('hello and admission requests are strict', async () => {
    const cert = await signCertificate(gen1, certFields());
    expect(Hello.safeParse({ v: 1, type: 'hello', cert, revocations: [] }).success).toBe(true);
    expect(Hello.safeParse({ v: 1, type: 'hello', cert: null, revocations: [] }).success).toBe(true);
    expect(
      Hello.safeParse({ v: 1, type: 'hello', cert: { ...cert, extra: 1 }, revocations: [] }).success,
    ).toBe(false);
    expect(Hello.safeParse({ v: 2, type: 'hello', cert: null, revocations: [] }).success).toBe(false);
    expect(Hello.safeParse({ v: 1, type: 'hello', cert: null, revocations: [{}] }).success).toBe(false);
    expect(AdmitRequest.safeParse({ v: 1, type: 'renew' }).success).toBe(true);
    expect(AdmitRequest.safeParse({ v: 1, type: 'join', invitation: null }).success).toBe(false);
    expect(AdmitRequest.safeParse({ v: 1, type: 'admin' }).success).toBe(false);
  });
});
