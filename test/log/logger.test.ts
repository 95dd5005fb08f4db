// The program's one logger (sandbox/log.ts, re-exported by node/logger.ts): pino JSON lines when
// the destination is not a TTY, readable lines when it is, errors whole, VTNODE_DEBUG applied;
// libp2p's logs through it (node/logger.ts: libp2pLogger) on a real libp2p node.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { afterEach, describe, expect, it } from 'vitest';
import { createHost } from '../../node/fleet/host.ts';
import { createLogging, libp2pLogger, logger, setLogging } from '../../node/logger.ts';
import { logging } from '../../sandbox/log.ts';
import { type LogRecord, logRecords, renderLogLine } from '../helpers/log-lines.ts';

/** A logging whose lines the test reads: `records()` parses them, `text()` is the raw text. */
function capture(options: { spec?: string; pretty?: boolean; tty?: boolean } = {}) {
  const out = new PassThrough();
  if (options.tty) Object.assign(out, { isTTY: true });
  let text = '';
  out.on('data', (d) => {
    text += d;
  });
  const made = createLogging({
    spec: options.spec ?? '',
    destination: out,
    pretty: options.pretty,
    colorize: false,
  });
  return { logging: made, text: () => text, records: (): LogRecord[] => logRecords(text) };
}

const original = logging();
afterEach(() => setLogging(original));

describe('lines', () => {
  it('JSON when the destination is not a TTY: one object per line, with level, time, pid, component, msg', () => {
    const c = capture({ spec: 'vtnode:t' });
    setLogging(c.logging);
    const log = logger('vtnode:t:one');
    log('debug %s %d', 'line', 1);
    log.info('info line');
    log.warn('warn "quoted"\nsecond line');
    log.error('error line');
    const lines = c.text().trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    for (const l of lines) expect(() => JSON.parse(l)).not.toThrow();
    const rs = c.records();
    expect(rs.map((r) => [r.level, r.component, r.msg])).toEqual([
      [20, 'vtnode:t:one', 'debug line 1'],
      [30, 'vtnode:t:one', 'info line'],
      [40, 'vtnode:t:one', 'warn "quoted"\nsecond line'],
      [50, 'vtnode:t:one', 'error line'],
    ]);
    expect(rs[0]!.pid).toBe(process.pid);
    expect(Date.parse(rs[0]!.time)).toBeGreaterThan(0);
    expect(renderLogLine(lines[1]!)).toMatch(/^\S+Z info vtnode:t:one: info line$/);
  });

  it('readable when the destination is a TTY (or when asked): no JSON, level and component shown', () => {
    for (const c of [capture({ tty: true }), capture({ pretty: true })]) {
      expect(c.logging.pretty).toBe(true);
      setLogging(c.logging);
      logger('vtnode:t:two').info('job %s accepted', 'j1');
      logger('vtnode:t:two').warn('careful');
      const text = c.text();
      expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: vtnode:t:two: job j1 accepted\n/);
      expect(text).toMatch(/\] WARN: vtnode:t:two: careful\n/);
      expect(c.records()).toEqual([]);
    }
    expect(capture().logging.pretty).toBe(false);
    expect(capture({ tty: true, pretty: false }).logging.pretty).toBe(false);
  });

  it('an Error among the arguments: its message in the line, the whole error (message, stack) in err', () => {
    for (const pretty of [false, true]) {
      const c = capture({ pretty });
      setLogging(c.logging);
      const err = new Error('disk on fire');
      logger('vtnode:t:err').error('cannot write %s: %s', 'samples.db', err);
      if (pretty) {
        expect(c.text()).toContain('vtnode:t:err: cannot write samples.db: disk on fire');
        expect(c.text()).toContain(err.stack!.split('\n')[1]!.trim());
        continue;
      }
      const [r] = c.records();
      expect(r!.msg).toBe('cannot write samples.db: disk on fire');
      expect(r!.err).toMatchObject({ type: 'Error', message: 'disk on fire', stack: err.stack });
      expect(r!.err!.stack).toMatch(/logger\.test\.ts/);
    }
  });

  it('VTNODE_DEBUG: debug lines only for named components, the level threshold for the rest', () => {
    const c = capture({ spec: 'vtnode:a,level=warn' });
    setLogging(c.logging);
    const a = logger('vtnode:a:x');
    const b = logger('vtnode:b');
    expect([a.enabled, b.enabled]).toEqual([true, false]);
    a('a debug');
    b('b debug');
    b.info('b info');
    b.warn('b warn');
    a.info('a info');
    expect(c.records().map((r) => r.msg)).toEqual(['a debug', 'b warn', 'a info']);
  });

  it('an unreadable VTNODE_DEBUG is said once, at warn level, naming the entry', () => {
    const c = capture({ spec: 'level=shouty' });
    expect(c.records()).toEqual([
      expect.objectContaining({ level: 40, component: 'vtnode:log', msg: expect.stringMatching(/"shouty"/) }),
    ]);
  });

  it('loggers made before a new logging follow it (module-level loggers in tests)', () => {
    const log = logger('vtnode:t:early');
    const first = capture();
    setLogging(first.logging);
    log.info('one');
    const second = capture();
    setLogging(second.logging);
    log.info('two');
    expect(first.records().map((r) => r.msg)).toEqual(['one']);
    expect(second.records().map((r) => r.msg)).toEqual(['two']);
  });
});

describe('a child process', () => {
  it('writes JSON log lines on stderr (not a TTY) and keeps stdout clean', async () => {
    const script = [
      "import { logger } from './node/logger.ts';",
      "logger('vtnode:child').info('hello %s', 'there');",
      "logger('vtnode:child')('hidden');",
      "process.stdout.write(JSON.stringify({ ok: true }) + '\\n');",
    ].join('\n');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: new URL('../..', import.meta.url).pathname,
      env: { ...process.env, VTNODE_DEBUG: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(0);
    expect(stdout).toBe('{"ok":true}\n');
    const records = logRecords(stderr);
    expect(records.map((r) => [r.level, r.component, r.msg])).toEqual([[30, 'vtnode:child', 'hello there']]);
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  }, 20_000);
});

describe('libp2p through the same logger', () => {
  async function startAndStop(spec: string): Promise<LogRecord[]> {
    const c = capture({ spec });
    setLogging(c.logging);
    const host = await createHost({
      privateKey: await generateKeyPair('Ed25519'),
      psk: randomBytes(32).toString('hex'),
      listen: ['/ip4/127.0.0.1/tcp/0'],
      mdns: false,
      topics: [],
    });
    await host.stop();
    setLogging(original);
    return c.records();
  }

  it('a real libp2p node emits through it when VTNODE_DEBUG names libp2p', async () => {
    const records = await startAndStop('libp2p');
    const libp2p = records.filter((r) => r.component.startsWith('libp2p'));
    expect(libp2p.length).toBeGreaterThan(0);
    expect(libp2p.every((r) => r.level === 20 || r.level === 40)).toBe(true);
    // libp2p's own format verbs (%p peer id, %a multiaddr) come out as text, not as stray verbs.
    expect(libp2p.some((r) => /\/ip4\/127\.0\.0\.1\/tcp\/\d+/.test(r.msg))).toBe(true);
    expect(libp2p.some((r) => /%[pabtce]\b/.test(r.msg))).toBe(false);
  }, 20_000);

  it('and nothing when it does not (vtnode: only, or nothing named)', async () => {
    for (const spec of ['vtnode:', '']) {
      const records = await startAndStop(spec);
      expect(records.filter((r) => r.component.startsWith('libp2p'))).toEqual([]);
    }
  }, 20_000);

  it('the bridge: debug, error (at warn, only when named), trace (only with level=trace), scopes, verbs', () => {
    const lines = (spec: string) => {
      const c = capture({ spec });
      setLogging(c.logging);
      const log = libp2pLogger().forComponent('libp2p:dialer');
      log('dialing %p at %a', 'peer-1', '/ip4/10.0.0.1/tcp/1');
      log.error('dial failed: %e', new Error('refused'));
      log.trace('bytes %b', new Uint8Array([1, 2, 255]));
      log.newScope('queue')('queued %d', 3);
      setLogging(original);
      return c.records().map((r) => [r.level, r.component, r.msg]);
    };
    expect(lines('libp2p:dialer')).toEqual([
      [20, 'libp2p:dialer', 'dialing peer-1 at /ip4/10.0.0.1/tcp/1'],
      [40, 'libp2p:dialer', 'dial failed: refused'],
      [20, 'libp2p:dialer:queue', 'queued 3'],
    ]);
    expect(lines('libp2p:dialer,level=trace')).toContainEqual([10, 'libp2p:dialer', 'bytes 0102ff']);
    expect(lines('libp2p:dialer:queue')).toEqual([[20, 'libp2p:dialer:queue', 'queued 3']]);
    expect(lines('vtnode:')).toEqual([]);
    expect(libp2pLogger().forComponent('libp2p:x').enabled).toBe(false);
  });
});
