import { describe, expect, it } from 'vitest';
import { CliError } from '../../cli/command.ts';
import { expandUiFlag, uiSettings } from '../../cli/ui.ts';
import { hostOf } from '../../node/ui/server.ts';
import { isLoopback, newToken, requestToken, TOKEN_COOKIE, tokenMatches } from '../../node/ui/token.ts';

describe('the access token', () => {
  it('matches only itself: not a prefix, an extension, another case, empty or missing', () => {
    const t = newToken();
    expect(t).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(newToken()).not.toBe(t);
    expect(tokenMatches(t, t)).toBe(true);
    for (const wrong of [
      t.slice(0, -1),
      `${t}x`,
      t.toUpperCase() === t ? t.toLowerCase() : t.toUpperCase(),
      '',
      ' ',
      null,
      undefined,
    ]) {
      expect(tokenMatches(wrong, t), JSON.stringify(wrong)).toBe(false);
    }
    // An empty expected token never matches (not even the empty string).
    expect(tokenMatches('', '')).toBe(false);
  });

  it('is read from ?token=, a Bearer header or the page cookie, in that order', () => {
    const url = (q = '') => new URL(`http://127.0.0.1:1/${q}`);
    expect(requestToken(url('?token=a'), { authorization: 'Bearer b', cookie: `${TOKEN_COOKIE}=c` })).toBe(
      'a',
    );
    expect(requestToken(url(), { authorization: 'Bearer b', cookie: `${TOKEN_COOKIE}=c` })).toBe('b');
    expect(requestToken(url(), { cookie: `other=1; ${TOKEN_COOKIE}=c%3D; x=2` })).toBe('c=');
    expect(requestToken(url(), { authorization: 'Basic b', cookie: 'vtnode_ui_tokenx=z' })).toBeNull();
    expect(requestToken(url(), {})).toBeNull();
  });

  it('loopback is 127.0.0.0/8, ::1 and localhost; nothing else', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '192.168.1.2', 'localhost.evil.example', '127.0.0.1.evil.example', ''])
      expect(isLoopback(h), h).toBe(false);
  });

  it('reads the host name of a Host header', () => {
    expect(hostOf('127.0.0.1:8080')).toBe('127.0.0.1');
    expect(hostOf('[::1]:8080')).toBe('::1');
    expect(hostOf('localhost')).toBe('localhost');
    expect(hostOf('evil.example:80')).toBe('evil.example');
    expect(hostOf(undefined)).toBe('');
  });
});

describe('--ui [PORT]', () => {
  it('takes a following number as the port, and nothing else', () => {
    expect(expandUiFlag(['--ui'])).toEqual(['--ui']);
    expect(expandUiFlag(['--ui', '8080', '--mdns'])).toEqual(['--ui', '--ui-port', '8080', '--mdns']);
    expect(expandUiFlag(['--ui=9000'])).toEqual(['--ui', '--ui-port', '9000']);
    // A join token after --ui is the positional, not a port.
    expect(expandUiFlag(['--ui', 'vt1abc'])).toEqual(['--ui', 'vt1abc']);
    expect(expandUiFlag(['--ui', '-k'])).toEqual(['--ui', '-k']);
    // After `--` nothing is an option.
    expect(expandUiFlag(['--', '--ui', '1'])).toEqual(['--', '--ui', '1']);
  });

  it('is off unless asked for; binds loopback by default; bad ports are usage errors', () => {
    expect(uiSettings({})).toBeNull();
    expect(uiSettings({ ui: true })).toEqual({ host: '127.0.0.1', port: 0 });
    expect(uiSettings({ ui: true, 'ui-port': '8080' })).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(uiSettings({ 'ui-host': '0.0.0.0' })).toEqual({ host: '0.0.0.0', port: 0 });
    for (const port of ['65536', '-1', 'abc', '1.5', '']) {
      const err = (() => {
        try {
          uiSettings({ ui: true, 'ui-port': port });
        } catch (e) {
          return e;
        }
        return null;
      })();
      expect(err, port).toBeInstanceOf(CliError);
      expect((err as CliError).message).toMatch(/--ui-port/);
    }
    expect(() => uiSettings({ ui: true, 'ui-host': ' ' })).toThrow(/--ui-host/);
  });
});
