// VTNODE_DEBUG, parsed once for the whole program (sandbox/log-filter.ts): prefixes, `*`, a level.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { levelFor, named, parseLogFilter, shows } from '../../sandbox/log-filter.ts';

describe('parseLogFilter', () => {
  it('unset or empty: no component named, threshold info', () => {
    for (const spec of [undefined, '', ' ', ',', ' , ,']) {
      expect(parseLogFilter(spec)).toEqual({ level: 'info', all: false, prefixes: [], problems: [] });
    }
  });

  it('comma-separated prefixes, blanks trimmed, empty entries ignored', () => {
    const f = parseLogFilter(' vtnode:worker , ,libp2p:gossipsub,');
    expect(f.prefixes).toEqual(['vtnode:worker', 'libp2p:gossipsub']);
    expect(f.all).toBe(false);
    expect(named(f, 'vtnode:worker:executor')).toBe(true);
    expect(named(f, 'libp2p:gossipsub')).toBe(true);
    expect(named(f, 'vtnode:collector')).toBe(false);
    expect(named(f, 'libp2p:tcp')).toBe(false);
  });

  it('`*` names every component, with or without blanks around it', () => {
    for (const spec of ['*', ' * ', 'vtnode:x, *']) {
      const f = parseLogFilter(spec);
      expect(f.all).toBe(true);
      expect(named(f, 'anything:at:all')).toBe(true);
    }
  });

  it('a prefix is a prefix, not a pattern', () => {
    const f = parseLogFilter('vtnode:work');
    expect(named(f, 'vtnode:worker')).toBe(true);
    expect(named(f, 'xvtnode:worker')).toBe(false);
    expect(named(parseLogFilter('vtnode:*'), 'vtnode:worker')).toBe(false);
  });

  it('level=LEVEL sets the threshold, case-insensitive; the last one wins', () => {
    expect(parseLogFilter('level=warn').level).toBe('warn');
    expect(parseLogFilter('level=DEBUG').level).toBe('debug');
    expect(parseLogFilter('level=error, level=trace').level).toBe('trace');
    expect(parseLogFilter('level=silent').level).toBe('silent');
  });

  it('what it does not understand is named in a problem; the rest still applies', () => {
    const f = parseLogFilter('vtnode:a,level=loud,vtnode b,level=');
    expect(f.prefixes).toEqual(['vtnode:a']);
    expect(f.level).toBe('info');
    expect(f.problems).toEqual([
      'VTNODE_DEBUG: level "loud" is not one of trace, debug, info, warn, error, silent',
      'VTNODE_DEBUG: "vtnode b" is not a component prefix (it holds blanks)',
      'VTNODE_DEBUG: level "" is not one of trace, debug, info, warn, error, silent',
    ]);
  });
});

describe('levelFor and shows', () => {
  it('a named component logs at debug, others at the threshold', () => {
    const f = parseLogFilter('vtnode:a');
    expect(levelFor(f, 'vtnode:a:b')).toBe('debug');
    expect(levelFor(f, 'vtnode:b')).toBe('info');
    expect(shows(levelFor(f, 'vtnode:a:b'), 'debug')).toBe(true);
    expect(shows(levelFor(f, 'vtnode:b'), 'debug')).toBe(false);
    expect(shows(levelFor(f, 'vtnode:b'), 'info')).toBe(true);
  });

  it('level=warn hides info lines of unnamed components, not debug lines of named ones', () => {
    const f = parseLogFilter('vtnode:a,level=warn');
    expect(shows(levelFor(f, 'vtnode:b'), 'info')).toBe(false);
    expect(shows(levelFor(f, 'vtnode:b'), 'warn')).toBe(true);
    expect(shows(levelFor(f, 'vtnode:a'), 'debug')).toBe(true);
  });

  it('trace only with level=trace; silent silences everything, named or not', () => {
    expect(levelFor(parseLogFilter('libp2p:'), 'libp2p:tcp')).toBe('debug');
    expect(levelFor(parseLogFilter('libp2p:,level=trace'), 'libp2p:tcp')).toBe('trace');
    // Not to the components not named: below info, the level only concerns named ones.
    expect(levelFor(parseLogFilter('libp2p:gossipsub,level=trace'), 'libp2p:tcp')).toBe('info');
    expect(levelFor(parseLogFilter('level=debug'), 'vtnode:a')).toBe('info');
    expect(levelFor(parseLogFilter('level=error'), 'vtnode:a')).toBe('error');
    const silent = parseLogFilter('*,level=silent');
    expect(levelFor(silent, 'vtnode:a')).toBe('silent');
    for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'silent'] as const)
      expect(shows('silent', level)).toBe(false);
  });

  it('the order of levels', () => {
    expect(shows('trace', 'trace')).toBe(true);
    expect(shows('debug', 'trace')).toBe(false);
    expect(shows('info', 'warn')).toBe(true);
    expect(shows('error', 'warn')).toBe(false);
    expect(shows('error', 'error')).toBe(true);
  });
});

// Regression: node/logger.ts read VTNODE_DEBUG itself and a trailing comma (an empty entry) turned
// on every component's debug lines, while ` *` (a blank before the star) turned on none.
describe('logger(component).enabled from the environment', () => {
  const saved = process.env['VTNODE_DEBUG'];
  afterEach(() => {
    if (saved === undefined) delete process.env['VTNODE_DEBUG'];
    else process.env['VTNODE_DEBUG'] = saved;
    vi.resetModules();
  });

  async function enabled(spec: string, component: string): Promise<boolean> {
    process.env['VTNODE_DEBUG'] = spec;
    vi.resetModules();
    const { logger } = await import('../../node/logger.ts');
    return logger(component).enabled;
  }

  it('an empty entry names nothing', async () => {
    expect(await enabled('vtnode:a,', 'vtnode:b')).toBe(false);
    expect(await enabled('vtnode:a, ,', 'vtnode:b')).toBe(false);
    expect(await enabled(',', 'vtnode:b')).toBe(false);
    expect(await enabled('vtnode:a,', 'vtnode:a:x')).toBe(true);
  });

  it('a star with blanks around it names everything', async () => {
    expect(await enabled(' *', 'vtnode:b')).toBe(true);
    expect(await enabled('vtnode:a, * ', 'vtnode:b')).toBe(true);
  });
});
