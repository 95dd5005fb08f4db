import { z } from 'zod';

/** Join tokens this build reads and writes: `vt1.` + base64url(JSON). */
export const TOKEN_VERSION = 1;
const PREFIX = `vt${TOKEN_VERSION}.`;

/** Fleet ids: lower-case names, used in topic names. */
export const FleetId = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9-]{0,62}$/,
    'a fleet name is 1-63 characters of a-z, 0-9 and -, starting with a letter or digit',
  );

/** The fleet's pre-shared key: 32 bytes as 64 lower-case hex digits. */
export const Psk = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 hex digits');

/** A bootstrap address: a multiaddr ending in /p2p/<peer id>. */
export const BootstrapAddr = z
  .string()
  .max(512)
  .regex(/^\/.+\/p2p\/[1-9A-HJ-NP-Za-km-z]+$/, 'expected a multiaddr ending in /p2p/<peer id>');

export const TokenBody = z.object({
  /** Fleet id. */
  fleet: FleetId,
  /** Pre-shared key of the fleet's private network. */
  psk: Psk,
  /** Where a joiner dials first. */
  bootstrap: z.array(BootstrapAddr).min(1).max(32),
  /** Expiry, ms since epoch. */
  exp: z.number().int().positive(),
  /** Issue time, ms since epoch. */
  iat: z.number().int().positive(),
});
export type TokenBody = z.infer<typeof TokenBody>;

export type TokenErrorCode = 'garbled' | 'version' | 'expired' | 'fleet';

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
  /** When set, a token of another fleet (other id, or same id with another key) is refused. */
  expectFleet?: { fleet: string; psk: string };
}

/** Decodes and checks a token; throws a TokenError naming the problem. */
export function decodeToken(text: string, options: DecodeOptions): TokenBody {
  const token = text.trim();
  const version = /^vt(\d+)\./.exec(token);
  if (!version) {
    throw new TokenError('garbled', 'not a vtnode join token (it should start with "vt1.")');
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
  const body = parsed.data;
  if (body.exp <= options.now) {
    throw new TokenError(
      'expired',
      `the token expired at ${new Date(body.exp).toISOString()}; ask a fleet member for a fresh one (\`vtnode token\`)`,
    );
  }
  const expect = options.expectFleet;
  if (expect && (expect.fleet !== body.fleet || expect.psk !== body.psk)) {
    const what =
      expect.fleet !== body.fleet ? `fleet "${body.fleet}"` : `another fleet also named "${body.fleet}"`;
    throw new TokenError(
      'fleet',
      `the token is for ${what}, but this data dir belongs to fleet "${expect.fleet}"; use another --data-dir`,
    );
  }
  return body;
}

const DURATION = /^(\d+)(s|m|h|d|w)$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Parses a duration such as `90s`, `30m`, `12h`, `7d`, `2w` into ms; null if malformed. */
export function parseDuration(text: string): number | null {
  const m = DURATION.exec(text.trim());
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2]!]!;
  return ms > 0 && Number.isSafeInteger(ms) ? ms : null;
}
