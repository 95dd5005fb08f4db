import { describe, expect, it } from 'vitest';
import { decodeToken, encodeToken, parseDuration, type TokenBody, TokenError } from '../../protocol/token.ts';

const now = 1_800_000_000_000;
const body: TokenBody = {
  fleet: 'studio-fleet',
  psk: 'a'.repeat(64),
  bootstrap: ['/ip4/10.0.0.2/tcp/7461/p2p/12D3KooWJYNi68RHpnRSb9ZQvVXMjpXEeFPMuG8gGozqvWT6saKQ'],
  exp: now + 3_600_000,
  iat: now,
};

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TokenError);
    return (err as TokenError).code;
  }
  throw new Error('expected a TokenError');
}

describe('join token codec', () => {
  it('round-trips, versioned with a vt1. prefix in base64url', () => {
    const token = encodeToken(body);
    expect(token).toMatch(/^vt1\.[A-Za-z0-9_-]+$/);
    expect(decodeToken(token, { now })).toEqual(body);
    expect(decodeToken(`  ${token}\n`, { now })).toEqual(body);
    expect(decodeToken(token, { now, expectFleet: { fleet: body.fleet, psk: body.psk } })).toEqual(body);
  });

  it('refuses to encode an invalid body', () => {
    expect(() => encodeToken({ ...body, bootstrap: ['/ip4/1.2.3.4/tcp/1'] })).toThrow();
    expect(() => encodeToken({ ...body, fleet: 'Bad Name' })).toThrow();
  });

  it('garbled: not a token, bad characters, not JSON, missing or malformed fields', () => {
    expect(codeOf(() => decodeToken('hello', { now }))).toBe('garbled');
    expect(codeOf(() => decodeToken('vt1.abc$%', { now }))).toBe('garbled');
    expect(codeOf(() => decodeToken(`vt1.${Buffer.from('not json').toString('base64url')}`, { now }))).toBe(
      'garbled',
    );
    const missing = `vt1.${Buffer.from(JSON.stringify({ fleet: 'x' })).toString('base64url')}`;
    expect(() => decodeToken(missing, { now })).toThrow(/psk/);
    const badPsk = `vt1.${Buffer.from(JSON.stringify({ ...body, psk: 'zz' })).toString('base64url')}`;
    expect(() => decodeToken(badPsk, { now })).toThrow(/psk: expected 64 hex digits/);
    const truncated = encodeToken(body).slice(0, 40);
    expect(codeOf(() => decodeToken(truncated, { now }))).toBe('garbled');
  });

  it('wrong version', () => {
    const v2 = encodeToken(body).replace(/^vt1\./, 'vt2.');
    expect(codeOf(() => decodeToken(v2, { now }))).toBe('version');
    expect(() => decodeToken(v2, { now })).toThrow(/version 2/);
  });

  it('expired, at and after the expiry', () => {
    const token = encodeToken(body);
    expect(codeOf(() => decodeToken(token, { now: body.exp }))).toBe('expired');
    expect(() => decodeToken(token, { now: body.exp + 1 })).toThrow(/expired at/);
    expect(decodeToken(token, { now: body.exp - 1 })).toEqual(body);
  });

  it('wrong fleet: another id, or the same name with another key', () => {
    const token = encodeToken(body);
    expect(codeOf(() => decodeToken(token, { now, expectFleet: { fleet: 'other', psk: body.psk } }))).toBe(
      'fleet',
    );
    expect(() =>
      decodeToken(token, { now, expectFleet: { fleet: body.fleet, psk: 'b'.repeat(64) } }),
    ).toThrow(/another fleet also named/);
  });
});

describe('parseDuration', () => {
  it('parses units and rejects the rest', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('30m')).toBe(1_800_000);
    expect(parseDuration('12h')).toBe(43_200_000);
    expect(parseDuration('7d')).toBe(604_800_000);
    expect(parseDuration('2w')).toBe(1_209_600_000);
    for (const bad of ['', '7', 'd', '-1d', '1.5h', '0s', '7 days']) expect(parseDuration(bad)).toBeNull();
  });
});
