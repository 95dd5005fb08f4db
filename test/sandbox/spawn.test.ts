// Confinement.spawn: long-lived confined processes (the type-check service's transport).
import { chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import type { Confinement, SpawnedProcess, SpawnSpec } from '../../sandbox/confinement.ts';
import { DEFAULT_LIMITS } from '../../sandbox/limits.ts';
import { spawnGroup } from '../../sandbox/spawn-group.ts';
import { createUnconfined } from '../../sandbox/unconfined.ts';

let bwrap: Confinement;
let dir: string;
const lockDir = join(tmpdir(), 'vtnode-uids');
const spec = (script: string, extra: Partial<SpawnSpec> = {}): SpawnSpec => ({
  argv: ['/bin/sh', '-c', script],
  cwd: '/',
  readOnlyPaths: [dir],
  env: { PATH: '/usr/bin:/bin', HOME: '/tmp' },
  limits: DEFAULT_LIMITS,
  ...extra,
});

/** Everything the process writes on stdout until it exits. */
async function outputOf(p: SpawnedProcess): Promise<string> {
  let out = '';
  p.stdout.setEncoding('utf8');
  p.stdout.on('data', (c: string) => {
    out += c;
  });
  await p.exited;
  return out;
}

/** Resolves with the first stdout line. */
function firstLine(p: SpawnedProcess): Promise<string> {
  return new Promise((resolve) => {
    let buf = '';
    p.stdout.setEncoding('utf8');
    p.stdout.on('data', (c: string) => {
      buf += c;
      if (buf.includes('\n')) resolve(buf.slice(0, buf.indexOf('\n')));
    });
  });
}

beforeAll(async () => {
  bwrap = await createBwrapConfinement();
  dir = await mkdtemp(join(tmpdir(), 'vtnode-spawn-test-'));
  await writeFile(join(dir, 'data.txt'), 'readable\n', { mode: 0o644 });
  // As root the process runs as its own unprivileged uid: the folder must be readable by others.
  await chmod(dir, 0o755);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('bwrap spawn', () => {
  it('talks over stdio and ends when stdin closes', async () => {
    const p = await bwrap.spawn(spec('exec cat'));
    const out = outputOf(p);
    p.stdin.write('ping\n');
    p.stdin.end();
    expect(await out).toBe('ping\n');
    expect(await p.exited).toMatchObject({ exitCode: 0, killed: false, survivors: 0 });
  });

  it('reads its read-only paths, writes nothing but a private /tmp, sees nothing else', async () => {
    const p = await bwrap.spawn(
      spec(
        `cat ${dir}/data.txt; echo x > ${dir}/new.txt 2>/dev/null && echo WROTE-RO;` +
          ' echo t > /tmp/t && cat /tmp/t; ls /root /home 2>/dev/null | head -1; test -e /work && echo SEES-WORK; id -u',
        { readOnlyPaths: [dir] },
      ),
    );
    const lines = (await outputOf(p)).trim().split('\n');
    expect(lines.slice(0, 2)).toEqual(['readable', 't']);
    expect(lines).not.toContain('WROTE-RO');
    expect(lines).not.toContain('SEES-WORK');
    expect(await readdir(dir)).toEqual(['data.txt']);
    if (process.getuid?.() === 0) expect(Number(lines.at(-1))).not.toBe(0);
  });

  it('keeps its uid for its life and returns it afterwards', async () => {
    if (process.getuid?.() !== 0) return; // uids are dedicated only when the scorer runs as root
    const p = await bwrap.spawn(spec('id -u; exec cat'));
    const uid = await firstLine(p);
    expect(await readdir(lockDir)).toContain(uid);
    p.stdin.end();
    await p.exited;
    expect(await readdir(lockDir)).not.toContain(uid);
  });

  it('samples the CPU its processes use', async () => {
    const p = await bwrap.spawn(
      spec('i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done; exec cat'),
    );
    expect(await firstLine(p)).toBe('done');
    const { cpuMs } = await p.usage();
    expect(cpuMs).toBeGreaterThan(50);
    p.kill();
    const exit = await p.exited;
    expect(exit).toMatchObject({ killed: true, survivors: 0 });
    expect(exit.usage.cpuMs).toBeGreaterThanOrEqual(cpuMs);
  });

  it('kills everything it started, setsid children included, on kill() and on abort', async () => {
    const marker = `vtnode-spawn-${process.pid}`;
    const a = await bwrap.spawn(spec(`setsid /bin/sh -c 'sleep 100; : ${marker}' & echo up; exec cat`));
    expect(await firstLine(a)).toBe('up');
    a.kill();
    expect(await a.exited).toMatchObject({ killed: true, survivors: 0 });
    const ctl = new AbortController();
    const b = await bwrap.spawn(
      spec(`setsid /bin/sh -c 'sleep 100; : ${marker}' & echo up; exec cat`, { signal: ctl.signal }),
    );
    expect(await firstLine(b)).toBe('up');
    ctl.abort();
    expect(await b.exited).toMatchObject({ killed: true, survivors: 0 });
    const { execFileSync } = await import('node:child_process');
    expect(execFileSync('ps', ['-eo', 'args']).toString()).not.toContain(marker);
  });

  it('reports a command that cannot run inside the sandbox as a failed exit', async () => {
    const p = await bwrap.spawn({ ...spec(''), argv: ['/nonexistent/program'] });
    const exit = await p.exited;
    expect(exit.exitCode).not.toBe(0);
    expect(exit.survivors).toBe(0);
  });
});

describe('spawnGroup', () => {
  it('throws when the outermost program cannot start, after running onExit', async () => {
    let released = false;
    await expect(
      spawnGroup({
        argv: ['/nonexistent/program'],
        env: {},
        cwd: '/',
        onExit: async () => {
          released = true;
        },
      }),
    ).rejects.toThrow(/cannot start \/nonexistent\/program/);
    expect(released).toBe(true);
  });
});

describe('unconfined spawn', () => {
  it('talks over stdio and reports its exit', async () => {
    const p = await createUnconfined().spawn(spec('read x; echo "got $x"; exit 3'));
    const out = outputOf(p);
    p.stdin.write('it\n');
    expect(await out).toBe('got it\n');
    expect(await p.exited).toMatchObject({ exitCode: 3, killed: false, survivors: 0 });
  });
});
