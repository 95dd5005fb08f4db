import { z } from 'zod';
import { FleetId, Psk } from './fleet-id.ts';
import {
  FleetKey,
  Invitation,
  type KeyChain,
  MembershipError,
  verifyInvitation,
  verifyKeyChain,
} from './membership.ts';

/** Join tokens this build reads and writes: `vt2.` + base64url(JSON). Version 2 added the signed invitation. */
export const TOKEN_VERSION = 2;
const PREFIX = `vt${TOKEN_VERSION}.`;

export { FleetId, Psk };

/** A bootstrap address: a multiaddr ending in /p2p/<peer id>. */
export const BootstrapAddr = z
  .string()
  .max(512)
  .regex(/^\/.+\/p2p\/[1-9A-HJ-NP-Za-km-z]+$/, 'expected a multiaddr ending in /p2p/<peer id>');

/**
 * What a token holds. Only `invitation` is signed: `psk` and `bootstrap` are delivery (a joiner whose
 * copy was altered cannot reach the fleet, which is all an alteration can do), and `keys` lets the
 * joiner check the invitation and, later, its peers' certificates.
 */
export const TokenBody = z.object({
  /** Fleet id. */
  fleet: FleetId,
  /** Pre-shared key of the fleet's private network. */
  psk: Psk,
  /** Where a joiner dials first. */
  bootstrap: z.array(BootstrapAddr).min(1).max(32),
  /** The fleet's signing key chain, generation 1 first. */
  keys: z.array(FleetKey).min(1).max(64),
  /** The signed, expiring invitation a fleet-key holder exchanges for a membership certificate. */
  invitation: Invitation,
});
export type TokenBody = z.infer<typeof TokenBody>;

export type TokenErrorCode = 'garbled' | 'version' | 'expired' | 'fleet' | 'signature';

/** A token that cannot be used; `code` says why, the message says it to a person. */
export class TokenError extends Error {
  readonly code: TokenErrorCode;
  constructor(code: TokenErrorCode, message: string) {
    super(message);
    this.name = 'TokenError';
    this.code = code;
  }
}

export function encodeToken(body: TokenBody): string {
  const checked = TokenBody.parse(body);
  return PREFIX + Buffer.from(JSON.stringify(checked), 'utf8').toString('base64url');
}

export interface DecodeOptions {
  /** Current time, ms since epoch (expiry is checked against it). */
  now: number;
  /**
   * When set, a token of another fleet is refused: another id, or the same id with another
   * generation-1 key (`genesis`, a fleet's identity; the pre-shared key may have been rotated).
   */
  expectFleet?: { fleet: string; genesis: string };
}

function parseBody(text: string): TokenBody {
  const token = text.trim();
  const version = /^vt(\d+)\./.exec(token);
  if (!version) {
    throw new TokenError('garbled', `not a vtnode join token (it should start with "${PREFIX}")`);
  }
  if (Number(version[1]) !== TOKEN_VERSION) {
    throw new TokenError(
      'version',
      `this token is version ${version[1]}, but this vtnode reads version ${TOKEN_VERSION} tokens; ` +
        `use a vtnode of the same version as the fleet, or ask a member for a new token`,
    );
  }
  const payload = token.slice(version[0].length);
  if (!/^[A-Za-z0-9_-]+$/.test(payload)) {
    throw new TokenError(
      'garbled',
      'the token is damaged (characters outside base64url): copy it again whole',
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw new TokenError('garbled', 'the token is damaged (its payload is not JSON): copy it again whole');
  }
  const parsed = TokenBody.safeParse(json);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new TokenError('garbled', `the token is damaged (${fields})`);
  }
  return parsed.data;
}

/**
 * Decodes and checks a token: its key chain, the invitation's signature (an edited expiry or role
 * breaks it), expiry and fleet. Throws a TokenError naming the problem. The fleet-key holder checks
 * the invitation again against its own keys: these checks spare a joiner a doomed attempt, they are
 * not what keeps anyone out.
 */
export async function decodeToken(text: string, options: DecodeOptions): Promise<TokenBody> {
  const body = parseBody(text);
  let chain: KeyChain;
  try {
    chain = await verifyKeyChain(body.keys, body.fleet);
    await verifyInvitation(body.invitation, { chain, now: options.now });
  } catch (err) {
    if (!(err instanceof MembershipError)) throw err;
    if (err.code === 'expired')
      throw new TokenError(
        'expired',
        `the token expired at ${new Date(body.invitation.exp).toISOString()}; ask a fleet member for a fresh one (\`vtnode token\`)`,
      );
    throw new TokenError(
      'signature',
      `the token does not verify (${err.message}): ask for a fresh one, copied whole`,
    );
  }
  const expect = options.expectFleet;
  if (expect && (expect.fleet !== body.fleet || expect.genesis !== chain.genesis)) {
    const what =
      expect.fleet !== body.fleet ? `fleet "${body.fleet}"` : `another fleet also named "${body.fleet}"`;
    throw new TokenError(
      'fleet',
      `the token is for ${what}, but this data dir belongs to fleet "${expect.fleet}"; use another --data-dir`,
    );
  }
  return body;
}
