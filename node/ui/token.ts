import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** The cookie a browser gets once it opened the page's address with the right `?token=`. */
export const TOKEN_COOKIE = 'vtnode_ui_token';

/** A new random access token (URL-safe, 192 bits). */
export function newToken(): string {
  return randomBytes(24).toString('base64url');
}

/**
 * Whether `given` is `expected`, in time independent of where they differ and of `given`'s length
 * (both are hashed to 32 bytes first, then compared with crypto.timingSafeEqual).
 */
export function tokenMatches(given: string | null | undefined, expected: string): boolean {
  if (typeof given !== 'string' || expected.length === 0) return false;
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The token a request carries: `?token=`, `Authorization: Bearer`, or the page's cookie (in that order). */
export function requestToken(url: URL, headers: { authorization?: string; cookie?: string }): string | null {
  const q = url.searchParams.get('token');
  if (q !== null) return q;
  const auth = headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice('Bearer '.length).trim();
  for (const part of (headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === TOKEN_COOKIE) return decodeURIComponent(value.join('='));
  }
  return null;
}

/** Whether a host name binds loopback only (no token needed there). */
export function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
