import { describe, expect, it } from 'vitest';
import { cloneArgv } from '../../sandbox/box.ts';
import { bwrapArgv, bwrapFeatures, bwrapSpawnArgv, dedupePaths } from '../../sandbox/bwrap.ts';
import { type EvaluationParts, evaluationFingerprint } from '../../sandbox/fingerprint.ts';
import { DEFAULT_LIMITS } from '../../sandbox/limits.ts';
import {
  parsePs,
  SEATBELT_NO_BOX,
  seatbeltArgv,
  seatbeltProfile,
  seatbeltSpawnArgv,
} from '../../sandbox/seatbelt.ts';

const limits = { ...DEFAULT_LIMITS, wallMs: 30_000 };

describe('bwrap argv', () => {
  const plan = {
    bwrap: '/usr/bin/bwrap',
    prlimit: '/usr/bin/prlimit',
    features: { disableUserns: true, tmpfsSize: true },
    system: [
      { path: '/usr', kind: 'bind' as const },
      { path: '/bin', kind: 'symlink' as const, target: 'usr/bin' },
    ],
    readOnly: ['/ws/node_modules', '/opt/node'],
    box: '/tmp/vtnode-boxes/box-1',
    cwd: '/tmp/vtnode-boxes/box-1',
    env: { PATH: '/usr/bin:/bin', HOME: '/tmp/vtnode-boxes/box-1/.home' },
    limits,
    tmpBytes: 16 * 1024 * 1024,
    argv: ['/opt/node/bin/node', '--test', 'x.test.js'],
  };

  it('matches the snapshot', () => {
    expect(bwrapArgv(plan)).toMatchSnapshot();
  });

  it('unshares everything, never nests user namespaces, binds only the box read-write', () => {
    const a = bwrapArgv(plan);
    for (const flag of [
      '--unshare-all',
      '--unshare-user',
      '--disable-userns',
      '--die-with-parent',
      '--new-session',
      '--clearenv',
    ])
      expect(a).toContain(flag);
    const rw = a.flatMap((x, i) => (x === '--bind' ? [a[i + 1]] : []));
    expect(rw).toEqual([plan.box]);
    expect(a.indexOf('--remount-ro')).toBeGreaterThan(a.lastIndexOf('--ro-bind'));
    expect(a.slice(a.indexOf('--') + 1, a.indexOf('--') + 2)).toEqual(['/usr/bin/prlimit']);
    expect(a.slice(-3)).toEqual(plan.argv);
  });

  it('leaves out what an old bubblewrap lacks', () => {
    const a = bwrapArgv({ ...plan, features: bwrapFeatures('bubblewrap 0.6.1') });
    expect(a).not.toContain('--disable-userns');
    expect(a).not.toContain('--size');
    expect(bwrapFeatures('bubblewrap 0.8.0')).toMatchObject({ disableUserns: true, version: '0.8.0' });
    expect(() => bwrapFeatures('nonsense')).toThrow(/version/);
  });

  it('spawns long-lived processes with the same argv minus every writable bind', () => {
    const { box: _box, ...rest } = plan;
    const { wallMs: _w, outputBytes: _o, ...processLimits } = plan.limits;
    const a = bwrapSpawnArgv({ ...rest, limits: processLimits, argv: ['/opt/node/bin/node', 'service.mjs'] });
    expect(a).toMatchSnapshot();
    const options = a.slice(0, a.indexOf('--'));
    for (const flag of ['--bind', '--bind-try', '--dev-bind', '--dev-bind-try'])
      expect(options).not.toContain(flag);
    expect(a.join(' ')).not.toContain('vtnode-no-box');
    expect(options).toContain('--unshare-all');
    expect(options.slice(options.indexOf('--tmpfs'), options.indexOf('--tmpfs') + 2)).toEqual([
      '--tmpfs',
      '/tmp',
    ]);
    // Everything but the box bind is bwrapArgv's own.
    const run = bwrapArgv({ ...plan, argv: ['/opt/node/bin/node', 'service.mjs'] });
    const at = run.indexOf('--bind');
    expect([...run.slice(0, at), ...run.slice(at + 3)]).toEqual(a);
  });

  it('dedupes nested read-only paths', () => {
    expect(dedupePaths(['/a/b', '/a', '/c', '/a/b/c', '/ab', '/c'])).toEqual(['/a', '/c', '/ab']);
  });
});

describe('Seatbelt profile', () => {
  it('matches the snapshot and never contains a path given at run time', () => {
    const profile = seatbeltProfile(2);
    expect(profile).toMatchSnapshot();
    expect(profile).toContain('(deny default)');
    expect(profile).not.toMatch(/network/);
    expect(profile).not.toMatch(/npmrc/);
  });

  it('passes paths as -D parameters', () => {
    const argv = seatbeltArgv({
      box: '/private/var/folders/x/box-1',
      readOnly: ['/Users/me/ws/node_modules', '/Users/me/.nvm/versions/node/v22'],
      npmCache: '/Users/me/.npm',
      limits,
      argv: ['/Users/me/.nvm/versions/node/v22/bin/node', '--test', 'a "quoted" $(path).js'],
    });
    expect(argv).toMatchSnapshot();
    const profile = argv[2]!;
    expect(profile).not.toContain('/Users/me');
    expect(profile).not.toContain('box-1');
    expect(argv).toContain('BOX=/private/var/folders/x/box-1');
    expect(argv).toContain('READ_1=/Users/me/.nvm/versions/node/v22');
    expect(argv.at(-1)).toBe('a "quoted" $(path).js');
  });
});

describe('Seatbelt spawn', () => {
  it('gives a long-lived process a box that cannot exist, so nothing is writable', () => {
    const { wallMs: _w, outputBytes: _o, ...processLimits } = limits;
    const argv = seatbeltSpawnArgv({
      readOnly: ['/Users/me/ws', '/Users/me/ws/node_modules'],
      npmCache: '/Users/me/.npm',
      limits: processLimits,
      argv: ['/usr/local/bin/node', 'service.mjs', '--root', '/Users/me/ws'],
    });
    expect(argv).toMatchSnapshot();
    expect(argv).toContain(`BOX=${SEATBELT_NO_BOX}`);
    expect(SEATBELT_NO_BOX.startsWith('/private/var/empty/')).toBe(true);
    expect(argv.at(-1)).toBe('/Users/me/ws');
  });

  it('reads usage from ps', () => {
    const text = [
      '  101     1   101   501 Ss     0:01.50   2048',
      '  102   101   101   501 S+  1:02:03.25   1024',
      '  103   101   101   501 Z      0:00.00      0',
      '  104   101   104     0 R   2-00:00:01   4096',
      'garbage',
    ].join('\n');
    expect(parsePs(text)).toEqual([
      { pid: 101, ppid: 1, pgid: 101, uid: 501, cpuTicks: 150, rssPages: 512 },
      { pid: 102, ppid: 101, pgid: 101, uid: 501, cpuTicks: 372325, rssPages: 256 },
      { pid: 104, ppid: 101, pgid: 104, uid: 0, cpuTicks: 17280100, rssPages: 1024 },
    ]);
  });
});

describe('clone command', () => {
  it('uses reflinks on Linux and clonefile on macOS', () => {
    expect(cloneArgv('linux', ['/ws/src', '/ws/test'], '/b')).toEqual([
      'cp',
      '-a',
      '--reflink=auto',
      '/ws/src',
      '/ws/test',
      '/b/',
    ]);
    expect(cloneArgv('darwin', ['/ws/src'], '/b')).toEqual(['/bin/cp', '-c', '-R', '-p', '/ws/src', '/b/']);
  });
});

describe('evaluation fingerprint', () => {
  const parts: EvaluationParts = {
    backend: { backend: 'bwrap', version: '0.8.0' },
    limits,
    workspaceId: `sha256:${'a'.repeat(64)}`,
    node: 'v22.23.3',
    tsc: 'typescript@5.9.3',
    runner: 'vitest@4.1.12',
    judge: {
      runner: 'vitest',
      testFiles: ['t.test.ts'],
      timeoutMs: 30_000,
      typecheck: ['tsc'],
      flaky: false,
    },
    lintFactor: 0.9,
  };
  it('is stable and sensitive to every part', () => {
    const fp = evaluationFingerprint(parts);
    expect(fp).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(evaluationFingerprint({ ...parts, backend: { version: '0.8.0', backend: 'bwrap' } })).toBe(fp);
    const variants: Partial<EvaluationParts>[] = [
      { backend: { backend: 'unconfined' } },
      { limits: { ...limits, wallMs: 1 } },
      { workspaceId: `sha256:${'b'.repeat(64)}` },
      { node: 'v22.0.0' },
      { tsc: null },
      { runner: 'vitest@4.0.0' },
      { judge: { ...parts.judge, testFiles: ['other.test.ts'] } },
      { lintFactor: 0.8 },
    ];
    for (const v of variants) expect(evaluationFingerprint({ ...parts, ...v })).not.toBe(fp);
  });
});
