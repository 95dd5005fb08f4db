import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { workspaceId } from '../../node/workspace/content-id.ts';
import { buildManifest, readChunk } from '../../node/workspace/manifest.ts';
import { manifestProblems } from '../../protocol/workspace.ts';

let dir: string;
const git = (...args: string[]) =>
  execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { stdio: 'pipe' });

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vtnode-manifest-'));
  await mkdir(join(dir, 'src'));
  await writeFile(join(dir, 'package.json'), '{"name":"x"}\n');
  await writeFile(join(dir, 'src/a.ts'), 'export const a = 1;\n'.repeat(10));
  await writeFile(join(dir, 'run.sh'), '#!/bin/sh\necho hi\n');
  await chmod(join(dir, 'run.sh'), 0o755);
  await writeFile(join(dir, '.env'), 'TOKEN=secret\n');
  await writeFile(join(dir, 'untracked.txt'), 'not tracked\n');
  git('init', '-q');
  git('add', 'package.json', 'src/a.ts', 'run.sh', '.env');
  git('commit', '-qm', 'x');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('buildManifest', () => {
  it('lists exactly the tracked files, hashes to the content id, withholds .env and keeps the exec bit', async () => {
    const served = await buildManifest(dir, { chunkBytes: 64 });
    const { manifest } = served;
    expect(manifest.id).toBe(await workspaceId(dir));
    expect(manifestProblems(manifest, manifest.id)).toEqual([]);
    expect(manifest.files.map((f) => f.path)).toEqual(['.env', 'package.json', 'run.sh', 'src/a.ts']);
    expect(manifest.files[0]).toMatchObject({ withheld: true, chunks: [] });
    expect(manifest.files.find((f) => f.path === 'run.sh')?.exec).toBe(true);
    expect(manifest.files.find((f) => f.path === 'src/a.ts')?.chunks).toHaveLength(4); // 200 bytes / 64
    // no chunk of the withheld file is servable
    for (const [, at] of served.chunks) expect(at.path).not.toBe('.env');
    const first = manifest.files.find((f) => f.path === 'src/a.ts')!.chunks[0]!;
    expect((await readChunk(served, first))?.toString()).toBe('export const a = 1;\n'.repeat(4).slice(0, 64));
  });

  it('refuses to serve a chunk whose file changed after indexing', async () => {
    const served = await buildManifest(dir, { chunkBytes: 64 });
    const first = served.manifest.files.find((f) => f.path === 'src/a.ts')!.chunks[0]!;
    await writeFile(join(dir, 'src/a.ts'), 'export const b = 2;\n'.repeat(10));
    await expect(readChunk(served, first)).rejects.toThrow(/changed since it was indexed/);
  });

  it('refuses a tracked symlink that leads outside the workspace', async () => {
    const outside = await mkdtemp(join(tmpdir(), 'vtnode-outside-'));
    try {
      await writeFile(join(outside, 'secret'), 'private\n');
      await symlink(join(outside, 'secret'), join(dir, 'link'));
      git('add', 'link');
      git('commit', '-qm', 'link');
      await expect(buildManifest(dir)).rejects.toThrow(/resolves outside the workspace/);
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it('answers null for a chunk it does not hold', async () => {
    const served = await buildManifest(dir);
    expect(await readChunk(served, 'f'.repeat(64))).toBeNull();
  });
});
