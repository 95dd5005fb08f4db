import { generateKeyPair } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  admissionFor,
  genesisKey,
  type Invitation,
  MembershipError,
  signInvitation,
  verifyKeyChain,
} from '../../protocol/membership.ts';
import { decodeToken, encodeToken, type TokenBody, TokenError } from '../../protocol/token.ts';

const now = 1_800_000_000_000;
const HOUR = 3_600_000;
const PEER = '12D3KooWJYNi68RHpnRSb9ZQvVXMjpXEeFPMuG8gGozqvWT6saKQ';
let fleetKey: PrivateKey;
let attackerKey: PrivateKey;
let body: TokenBody;
let genesis: string;

const invitationFields = (overrides: Partial<Invitation> = {}) => ({
  fleet: 'studio-fleet',
  gen: 1,
  roles: ['worker' as const, 'collector' as const],
  iat: now,
  exp: now + HOUR,
  nonce: '0f'.repeat(16),
  ...overrides,
});

beforeAll(async () => {
  [fleetKey, attackerKey] = await Promise.all([generateKeyPair('Ed25519'), generateKeyPair('Ed25519')]);
  const keys = [await genesisKey(fleetKey, 'studio-fleet', now - HOUR)];
  genesis = keys[0]!.publicKey;
  body = {
    fleet: 'studio-fleet',
    psk: 'a'.repeat(64),
    bootstrap: [`/ip4/10.0.0.2/tcp/7461/p2p/${PEER}`],
    keys,
    invitation: await signInvitation(fleetKey, invitationFields()),
  };
});

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(TokenError);
    return (err as TokenError).code;
  }
  throw new Error('expected a TokenError');
}

/** The token's JSON, edited, re-encoded as a token (what a person with a text editor can do). */
function edited(edit: (json: TokenBody) => unknown): string {
  const json = structuredClone(body);
  return `vt2.${Buffer.from(JSON.stringify(edit(json) ?? json)).toString('base64url')}`;
}

describe('join token codec', () => {
  it('round-trips, versioned with a vt2. prefix in base64url', async () => {
    const token = encodeToken(body);
    expect(token).toMatch(/^vt2\.[A-Za-z0-9_-]+$/);
    expect(await decodeToken(token, { now })).toEqual(body);
    expect(await decodeToken(`  ${token}\n`, { now })).toEqual(body);
    expect(await decodeToken(token, { now, expectFleet: { fleet: body.fleet, genesis } })).toEqual(body);
  });

  it('refuses to encode an invalid body', () => {
    expect(() => encodeToken({ ...body, bootstrap: ['/ip4/1.2.3.4/tcp/1'] })).toThrow();
    expect(() => encodeToken({ ...body, fleet: 'Bad Name' })).toThrow();
    expect(() => encodeToken({ ...body, keys: [] })).toThrow();
  });

  it('garbled: not a token, bad characters, not JSON, missing or malformed fields', async () => {
    expect(await codeOf(decodeToken('hello', { now }))).toBe('garbled');
    expect(await codeOf(decodeToken('vt2.abc$%', { now }))).toBe('garbled');
    expect(await codeOf(decodeToken(`vt2.${Buffer.from('not json').toString('base64url')}`, { now }))).toBe(
      'garbled',
    );
    const missing = `vt2.${Buffer.from(JSON.stringify({ fleet: 'x' })).toString('base64url')}`;
    await expect(decodeToken(missing, { now })).rejects.toThrow(/psk/);
    await expect(
      decodeToken(
        edited((j) => ({ ...j, psk: 'zz' })),
        { now },
      ),
    ).rejects.toThrow(/psk: expected 64 hex digits/);
    await expect(
      decodeToken(
        edited((j) => ({ ...j, invitation: undefined })),
        { now },
      ),
    ).rejects.toThrow(/invitation/);
    const truncated = encodeToken(body).slice(0, 40);
    expect(await codeOf(decodeToken(truncated, { now }))).toBe('garbled');
  });

  it('wrong version: the unsigned version 1, and a later one', async () => {
    const v1 = encodeToken(body).replace(/^vt2\./, 'vt1.');
    expect(await codeOf(decodeToken(v1, { now }))).toBe('version');
    await expect(decodeToken(v1, { now })).rejects.toThrow(/version 1/);
    expect(await codeOf(decodeToken(encodeToken(body).replace(/^vt2\./, 'vt3.'), { now }))).toBe('version');
  });

  it("expired, at and after the invitation's expiry", async () => {
    const token = encodeToken(body);
    expect(await codeOf(decodeToken(token, { now: body.invitation.exp }))).toBe('expired');
    await expect(decodeToken(token, { now: body.invitation.exp + 1 })).rejects.toThrow(/expired at/);
    expect(await decodeToken(token, { now: body.invitation.exp - 1 })).toEqual(body);
  });

  it('an edited expiry, role, nonce or key chain breaks the signature', async () => {
    const edits: ((j: TokenBody) => void)[] = [
      (j) => {
        j.invitation.exp += 365 * 24 * HOUR;
      },
      (j) => {
        j.invitation.roles = ['worker', 'submitter', 'collector'];
      },
      (j) => {
        j.invitation.nonce = 'ee'.repeat(16);
      },
      (j) => {
        j.keys[0]!.iat += 1;
      },
    ];
    for (const edit of edits) expect(await codeOf(decodeToken(edited(edit), { now }))).toBe('signature');
    // An expired invitation with its expiry pushed forward: the signature, not the date, refuses it.
    const revived = edited((j) => {
      j.invitation.exp = now + 10 * HOUR;
    });
    expect(await codeOf(decodeToken(revived, { now: now + 2 * HOUR }))).toBe('signature');
  });

  it("a token re-signed with another key passes the joiner's own checks but not the fleet's", async () => {
    const forged: TokenBody = {
      ...body,
      keys: [await genesisKey(attackerKey, body.fleet, now)],
      invitation: await signInvitation(attackerKey, invitationFields({ exp: now + 1000 * HOUR })),
    };
    const token = encodeToken(forged);
    // Self-consistent, so a fresh data dir takes it; a member's data dir knows the fleet's key.
    expect(await decodeToken(token, { now })).toEqual(forged);
    expect(await codeOf(decodeToken(token, { now, expectFleet: { fleet: body.fleet, genesis } }))).toBe(
      'fleet',
    );
    // The fleet-key holder checks the invitation against its own chain: refused.
    const chain = await verifyKeyChain(body.keys, body.fleet);
    const refused = await admissionFor(forged.invitation, PEER, { chain, now }, HOUR).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(MembershipError);
    expect((refused as MembershipError).code).toBe('signature');
  });

  it('wrong fleet: another id, or the same name with another fleet key', async () => {
    const token = encodeToken(body);
    expect(await codeOf(decodeToken(token, { now, expectFleet: { fleet: 'other', genesis } }))).toBe('fleet');
    await expect(
      decodeToken(token, { now, expectFleet: { fleet: body.fleet, genesis: 'CAESIO==' } }),
    ).rejects.toThrow(/another fleet also named/);
  });
});
