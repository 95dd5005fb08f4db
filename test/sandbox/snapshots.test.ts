import { describe, expect, it } from 'vitest';
import { cloneArgv } from '../../sandbox/box.ts';
import { bwrapArgv, bwrapFeatures, bwrapSpawnArgv, dedupePaths } from '../../sandbox/bwrap.ts';
import { type EvaluationParts, evaluationFingerprint } from '../../sandbox/fingerprint.ts';
import { DEFAULT_LIMITS } from '../../sandbox/limits.ts';
import {
  parsePs,
  parsePsTime,
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
    features: { disableUserns: true },
    system: [
      { path: '/usr', kind: 'bind' as const },
      { path: '/bin', kind: 'symlink' as const, target: 'usr/bin' },
    ],
    readOnly: ['/ws/node_modules', '/opt/node'],
    box: '/tmp/vtnode-boxes/box-1',
    protect: ['/tmp/vtnode-boxes/box-1/x.test.js', '/tmp/vtnode-boxes/box-1/.vtnode/integrity.mjs'],
    cwd: '/tmp/vtnode-boxes/box-1',
    env: { PATH: '/usr/bin:/bin', HOME: '/tmp/vtnode-boxes/box-1/.home' },
    limits,
    scratch: {
      tmp: '/tmp/vtnode-boxes/box-1/.vtnode-sandbox/tmp',
      shm: '/tmp/vtnode-boxes/box-1/.vtnode-sandbox/shm',
    },
    argv: ['/opt/node/bin/node', '--test', 'x.test.js'],
  };

  it('matches the snapshot', () => {
    expect(bwrapArgv(plan)).toMatchSnapshot();
  });

  it('unshares everything, never nests user namespaces, binds only folders of the box read-write', () => {
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
    const rw = a.flatMap((x, i) => (x === '--bind' ? [[a[i + 1], a[i + 2]]] : []));
    expect(rw).toEqual([
      [plan.scratch.shm, '/dev/shm'],
      [plan.scratch.tmp, '/tmp'],
      [plan.box, plan.box],
    ]);
    for (const [src] of rw) expect(src!.startsWith(`${plan.box}/`) || src === plan.box).toBe(true);
    // No tmpfs of bwrap's stays writable: /dev and the root are remounted read-only after every mount.
    expect(a).not.toContain('--tmpfs');
    const remounts = a.flatMap((x, i) => (x === '--remount-ro' ? [a[i + 1]] : []));
    expect(remounts).toEqual(['/dev', '/']);
    expect(a.indexOf('--remount-ro')).toBeGreaterThan(a.lastIndexOf('--ro-bind'));
    expect(a.indexOf('--remount-ro')).toBeGreaterThan(a.lastIndexOf('--bind'));
    expect(a.slice(a.indexOf('--') + 1, a.indexOf('--') + 2)).toEqual(['/usr/bin/prlimit']);
    expect(a.slice(-3)).toEqual(plan.argv);
  });

  it('binds the protected box files read-only over the box, after it', () => {
    const a = bwrapArgv(plan);
    const box = a.indexOf(plan.box);
    for (const p of plan.protect) {
      const i = a.indexOf(p);
      expect(a.slice(i - 1, i + 2)).toEqual(['--ro-bind', p, p]);
      expect(i).toBeGreaterThan(box);
    }
  });

  it('leaves out what an old bubblewrap lacks', () => {
    const a = bwrapArgv({ ...plan, features: bwrapFeatures('bubblewrap 0.6.1') });
    expect(a).not.toContain('--disable-userns');
    expect(a).not.toContain('--size');
    expect(bwrapFeatures('bubblewrap 0.8.0')).toMatchObject({ disableUserns: true, version: '0.8.0' });
    expect(() => bwrapFeatures('nonsense')).toThrow(/version/);
  });

  it('spawns long-lived processes with the same argv minus every writable bind', () => {
    const { box: _box, scratch: _scratch, protect: _protect, ...rest } = plan;
    const { cpuMs, memoryBytes, processes, fileSizeBytes } = plan.limits;
    const processLimits = { cpuMs, memoryBytes, processes, fileSizeBytes };
    const a = bwrapSpawnArgv({ ...rest, limits: processLimits, argv: ['/opt/node/bin/node', 'service.mjs'] });
    expect(a).toMatchSnapshot();
    const options = a.slice(0, a.indexOf('--'));
    for (const flag of ['--bind', '--bind-try', '--dev-bind', '--dev-bind-try'])
      expect(options).not.toContain(flag);
    expect(a.join(' ')).not.toMatch(/vtnode-no-(box|tmp|shm)/);
    expect(options).toContain('--unshare-all');
    // A private /tmp of 16 MiB; /dev/shm stays the read-only folder of bwrap's /dev.
    expect(options.slice(options.indexOf('--tmpfs') - 2, options.indexOf('--tmpfs') + 2)).toEqual([
      '--size',
      String(16 * 1024 * 1024),
      '--tmpfs',
      '/tmp',
    ]);
    expect(options.filter((x) => x === '/dev/shm')).toEqual([]);
    // Everything else is bwrapArgv's own.
    const run = bwrapArgv({ ...plan, protect: [], argv: ['/opt/node/bin/node', 'service.mjs'] });
    const same: string[] = [];
    for (let i = 0; i < run.length; i++) {
      if (run[i] !== '--bind') same.push(run[i]!);
      else {
        if (run[i + 2] === '/tmp') same.push('--size', String(16 * 1024 * 1024), '--tmpfs', '/tmp');
        i += 2;
      }
    }
    expect(same).toEqual(a);
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

  it('denies writes to the protected box files after allowing the box', () => {
    const profile = seatbeltProfile(1, 2);
    expect(profile.indexOf('(deny file-write*')).toBeGreaterThan(profile.indexOf('(allow file-write*'));
    expect(profile).toContain('(literal (param "PROTECT_1"))');
    const argv = seatbeltArgv({
      box: '/b',
      readOnly: [],
      protect: ['/b/x.test.js'],
      npmCache: '/n',
      limits,
      argv: ['node'],
    });
    expect(argv).toContain('PROTECT_0=/b/x.test.js');
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

describe('ps CPU time (macOS sampling)', () => {
  it('reads every ps time format into clock ticks, and nothing else', () => {
    expect(parsePsTime('0:00.02')).toBe(2);
    expect(parsePsTime('12:34.50')).toBe((12 * 60 + 34.5) * 100);
    expect(parsePsTime('1:02:03')).toBe(3723 * 100);
    expect(parsePsTime('2-01:00:00')).toBe((2 * 86400 + 3600) * 100);
    expect(parsePsTime('-')).toBe(0);
  });
});

describe('Seatbelt spawn', () => {
  it('gives a long-lived process a box that cannot exist, so nothing is writable', () => {
    const { cpuMs, memoryBytes, processes, fileSizeBytes } = limits;
    const processLimits = { cpuMs, memoryBytes, processes, fileSizeBytes };
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
      { pid: 101, ppid: 1, pgid: 101, uid: 501, cpuTicks: 150, reapedCpuTicks: 0, rssPages: 512, threads: 1 },
      {
        pid: 102,
        ppid: 101,
        pgid: 101,
        uid: 501,
        cpuTicks: 372325,
        reapedCpuTicks: 0,
        rssPages: 256,
        threads: 1,
      },
      {
        pid: 104,
        ppid: 101,
        pgid: 104,
        uid: 0,
        cpuTicks: 17280100,
        reapedCpuTicks: 0,
        rssPages: 1024,
        threads: 1,
      },
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
    integrity: `sha256:${'c'.repeat(64)}`,
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
      { integrity: `sha256:${'d'.repeat(64)}` },
    ];
    for (const v of variants) expect(evaluationFingerprint({ ...parts, ...v })).not.toBe(fp);
  });
});
