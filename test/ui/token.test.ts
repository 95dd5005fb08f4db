import { describe, expect, it } from 'vitest';
import { CliError } from '../../cli/command.ts';
import { commandLine } from '../../cli/options.ts';
import { UI_OPTIONS, uiSettings } from '../../cli/ui.ts';
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
  const line = commandLine({ prose: 'Usage: t [--ui [PORT]]', groups: [UI_OPTIONS], positionals: true });
  const parse = (argv: string[]) => line.parse(argv);

  it('takes a following number as the port, and nothing else', () => {
    expect(parse(['--ui']).values.ui).toBe(0);
    expect(parse(['--ui', '8080', 'x']).values.ui).toBe(8080);
    expect(parse(['--ui=9000']).values.ui).toBe(9000);
    // A join token after --ui is the positional, not a port.
    expect(parse(['--ui', 'vt1abc'])).toEqual({ values: { ui: 0 }, positionals: ['vt1abc'] });
    // After `--` nothing is an option.
    expect(parse(['--', '--ui', '1'])).toEqual({ values: {}, positionals: ['--ui', '1'] });
  });

  it('is off unless asked for; binds loopback by default; bad ports are usage errors', () => {
    expect(uiSettings(parse([]).values)).toBeNull();
    expect(uiSettings(parse(['--ui']).values)).toEqual({ host: '127.0.0.1', port: 0 });
    expect(uiSettings(parse(['--ui', '8080']).values)).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(uiSettings(parse(['--ui-host', '0.0.0.0']).values)).toEqual({ host: '0.0.0.0', port: 0 });
    for (const argv of [['--ui', '65536'], ['--ui=-1'], ['--ui=abc'], ['--ui=1.5'], ['--ui', '99999999']]) {
      const err = (() => {
        try {
          parse(argv);
        } catch (e) {
          return e;
        }
        return null;
      })();
      expect(err, argv.join(' ')).toBeInstanceOf(CliError);
      expect((err as CliError).exitCode).toBe(2);
      expect((err as CliError).message).toMatch(/^--ui must be a port number from 0 to 65535, got "/);
    }
    expect(() => parse(['--ui', '--ui-host', ' '])).toThrow(/^--ui-host must be a non-empty value, got " "/);
  });
});
