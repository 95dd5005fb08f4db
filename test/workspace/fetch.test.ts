import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newPsk } from '../../node/data-dir.ts';
import type { Host } from '../../node/fleet/host.ts';
import { handleFramed } from '../../node/wire/streams.ts';
import { fetchedManifest, fetchWorkspace, workspaceDirName } from '../../node/workspace/fetch.ts';
import { buildManifest, type ServedWorkspace } from '../../node/workspace/manifest.ts';
import { createWorkspaceServer } from '../../node/workspace/serve.ts';
import {
  MAX_WORKSPACE_FRAME_BYTES,
  sha256Of,
  WORKSPACE_PROTOCOL,
  type WorkspaceReply,
  WorkspaceRequest,
} from '../../protocol/workspace.ts';
import { connect, tempDir, testHost } from '../collect/helpers.ts';
import { notYet, pollFor } from '../helpers/poll.ts';

const psk = newPsk();
const CHUNK = 1024;
let src: { dir: string; cleanup(): Promise<void> };
let served: ServedWorkspace;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  src = await tempDir('vtnode-ws-src-');
  const dir = src.dir;
  await mkdir(join(dir, 'src/deep'), { recursive: true });
  await writeFile(join(dir, 'package.json'), '{"name":"ws"}\n');
  await writeFile(join(dir, 'src/big.bin'), randomBytes(40 * CHUNK + 17)); // 41 chunks
  await writeFile(join(dir, 'src/deep/a.ts'), 'export const a = 1;\n');
  await writeFile(join(dir, 'src/dup1.txt'), 'same\n'.repeat(300));
  await writeFile(join(dir, 'src/dup2.txt'), 'same\n'.repeat(300)); // the same chunks: fetched once
  await writeFile(join(dir, 'empty'), '');
  await writeFile(join(dir, 'run.sh'), '#!/bin/sh\n');
  await chmod(join(dir, 'run.sh'), 0o755);
  await writeFile(join(dir, '.env'), 'SECRET=hunter2\n');
  await writeFile(join(dir, '.npmrc'), '//registry.npmjs.org/:_authToken=abc\n');
  const git = (...a: string[]) =>
    execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', ...a], { stdio: 'pipe' });
  git('init', '-q');
  git('add', '-A');
  git('commit', '-qm', 'x');
  await writeFile(join(dir, 'untracked.txt'), 'never travels\n');
  served = await buildManifest(dir, { chunkBytes: CHUNK });
  cleanups.push(() => src.cleanup());
});

let dest: { dir: string; cleanup(): Promise<void> };
let client: Host;
beforeEach(async () => {
  dest = await tempDir('vtnode-ws-dest-');
  client = await testHost(psk);
});
afterEach(async () => {
  await client.stop();
  await dest.cleanup();
  while (cleanups.length > 1) await cleanups.pop()!();
});

/** A real host serving the workspace (optionally paced), connected to the client. */
async function holder(options: { bytesPerSecond?: number } = {}): Promise<Host> {
  const host = await testHost(psk);
  await createWorkspaceServer({
    host,
    workspaces: () => new Map([[served.manifest.id, served]]),
    ...options,
  });
  await connect(client, host);
  cleanups.push(async () => host.stop());
  return host;
}

/** A real host answering /vtnode/workspace/1 with `answer`. */
async function liar(answer: (req: WorkspaceRequest) => WorkspaceReply[]): Promise<Host> {
  const host = await testHost(psk);
  await handleFramed<typeof WorkspaceRequest, WorkspaceReply>(
    host,
    WORKSPACE_PROTOCOL,
    async (wire) => {
      const req = await wire.expect('a request');
      for (const reply of answer(req)) await wire.send(reply);
    },
    { schema: WorkspaceRequest, maxFrameBytes: MAX_WORKSPACE_FRAME_BYTES },
  );
  await connect(client, host);
  cleanups.push(async () => host.stop());
  return host;
}

/** Every file under `root`, relative, sorted. */
/** Waits (up to 10 s) until `n` verified chunks are in `chunkDir`. */
async function chunksLanded(chunkDir: string, n: number): Promise<void> {
  await pollFor(
    async () => {
      const landed = (await readdir(chunkDir).catch(() => [])).filter((f) => !f.endsWith('.tmp')).length;
      return landed >= n || notYet(`${landed} chunks`);
    },
    { what: `${n} chunks in ${chunkDir}`, timeoutMs: 10_000, pauseMs: 25 },
  );
}

async function tree(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(root.length + 1))
    .sort();
}

const ID = () => served.manifest.id;
/** The bytes of a chunk of the real workspace. */
function readServed(hash: string): Buffer {
  const at = served.chunks.get(hash)!;
  return readFileSync(join(src.dir, at.path)).subarray(at.start, at.end);
}
const honestPage = (req: WorkspaceRequest): WorkspaceReply[] =>
  req.kind === 'manifest'
    ? [
        {
          kind: 'manifest',
          id: req.id,
          chunkBytes: CHUNK,
          total: served.manifest.files.length,
          from: 0,
          files: served.manifest.files,
        },
      ]
    : [];

async function expectExactTree(root: string) {
  expect(await tree(root)).toEqual([
    'empty',
    'package.json',
    'run.sh',
    'src/big.bin',
    'src/deep/a.ts',
    'src/dup1.txt',
    'src/dup2.txt',
  ]);
  expect(await readFile(join(root, 'src/big.bin'))).toEqual(await readFile(join(src.dir, 'src/big.bin')));
  expect((await stat(join(root, 'run.sh'))).mode & 0o777).toBe(0o755);
  expect((await stat(join(root, 'package.json'))).mode & 0o777).toBe(0o644);
}

describe('fetchWorkspace over real libp2p', () => {
  it('fetches the tracked files from two holders at once, withholding credentials, each distinct chunk once', async () => {
    const [a, b] = [await holder(), await holder()];
    const got = await fetchWorkspace({
      host: client,
      id: ID(),
      holders: [a.peerId.toString(), b.peerId.toString()],
      dir: dest.dir,
      chunksPerRequest: 4,
    });
    expect(got.root).toBe(join(dest.dir, workspaceDirName(ID())));
    await expectExactTree(got.root);
    expect(got.fetched).toBe(new Set(served.manifest.files.flatMap((f) => f.chunks)).size);
    expect(got.dropped).toEqual([]);
    expect((await fetchedManifest(dest.dir, ID()))?.id).toBe(ID());
    // no partial dir is left behind
    expect((await readdir(dest.dir)).sort()).toEqual([
      workspaceDirName(ID()),
      `${workspaceDirName(ID())}.manifest.json`,
    ]);
  });

  it('resumes after an abort without fetching the chunks it already holds', async () => {
    const a = await holder({ bytesPerSecond: 20 * CHUNK }); // ~2.5 s for the whole workspace
    const stop = new AbortController();
    const holders = [a.peerId.toString()];
    const first = fetchWorkspace({
      host: client,
      id: ID(),
      holders,
      dir: dest.dir,
      chunksPerRequest: 1,
      signal: stop.signal,
    });
    const chunkDir = join(dest.dir, `.partial-${workspaceDirName(ID())}`, 'chunks');
    // wait for some chunks to land, then abort
    await chunksLanded(chunkDir, 5);
    stop.abort(new Error('test stops the fetch'));
    await expect(first).rejects.toThrow();
    const b = await holder();
    const again = await fetchWorkspace({
      host: client,
      id: ID(),
      holders: [b.peerId.toString()],
      dir: dest.dir,
    });
    expect(again.reused).toBeGreaterThanOrEqual(5);
    expect(again.fetched + again.reused).toBe(new Set(served.manifest.files.flatMap((f) => f.chunks)).size);
    await expectExactTree(again.root);
  });

  it('drops a holder that dies mid-way and fetches its chunks from the other', async () => {
    const slow = await holder({ bytesPerSecond: 10 * CHUNK });
    const other = await holder({ bytesPerSecond: 40 * CHUNK });
    const chunkDir = join(dest.dir, `.partial-${workspaceDirName(ID())}`, 'chunks');
    const fetching = fetchWorkspace({
      host: client,
      id: ID(),
      holders: [slow.peerId.toString(), other.peerId.toString()],
      dir: dest.dir,
      chunksPerRequest: 2,
    });
    await chunksLanded(chunkDir, 8);
    await slow.stop();
    const got = await fetching;
    expect(got.dropped.map((d) => d.peer)).toEqual([slow.peerId.toString()]);
    await expectExactTree(got.root);
  });

  it('takes in a holder that appears while it fetches, also after every holder it had is gone', async () => {
    // The fleet's adverts arrive one by one: the fetch starts knowing one holder, which dies mid-way;
    // a second, advertised only afterwards, finishes the fetch.
    const first = await holder({ bytesPerSecond: 10 * CHUNK });
    const known = [first.peerId.toString()];
    const chunkDir = join(dest.dir, `.partial-${workspaceDirName(ID())}`, 'chunks');
    const fetching = fetchWorkspace({
      host: client,
      id: ID(),
      holders: () => known,
      dir: dest.dir,
      chunksPerRequest: 2,
    });
    await chunksLanded(chunkDir, 4);
    await first.stop();
    const second = await holder();
    known.push(second.peerId.toString());
    const got = await fetching;
    expect(got.dropped.map((d) => d.peer)).toEqual([first.peerId.toString()]);
    expect(got.reused).toBe(0);
    await expectExactTree(got.root);
  });

  it('gives up when every holder is gone and none appears within holderWaitMs, keeping what arrived', async () => {
    const only = await holder({ bytesPerSecond: 10 * CHUNK });
    const chunkDir = join(dest.dir, `.partial-${workspaceDirName(ID())}`, 'chunks');
    const fetching = fetchWorkspace({
      host: client,
      id: ID(),
      holders: () => [only.peerId.toString()],
      dir: dest.dir,
      chunksPerRequest: 2,
      holderWaitMs: 200,
    });
    const failed = expect(fetching).rejects.toThrow(/chunks missing and no holder left/);
    await chunksLanded(chunkDir, 4);
    await only.stop();
    await failed;
    expect((await readdir(chunkDir)).length).toBeGreaterThanOrEqual(4);
  });

  it('drops a holder that sends bytes other than the chunk, records the offence, and fetches from the honest one', async () => {
    const offences: { peer: string; why: string }[] = [];
    const bad = await liar((req) =>
      req.kind === 'manifest'
        ? honestPage(req)
        : req.hashes.map((hash) => ({ kind: 'chunk', hash, data: Buffer.from('not it').toString('base64') })),
    );
    const good = await holder();
    const got = await fetchWorkspace({
      host: client,
      id: ID(),
      holders: [bad.peerId.toString(), good.peerId.toString()],
      dir: dest.dir,
      onOffence: (peer, why) => offences.push({ peer, why }),
    });
    await expectExactTree(got.root);
    expect(offences).toEqual([{ peer: bad.peerId.toString(), why: expect.stringMatching(/hashing to/) }]);
  });

  it.each([
    [
      'a manifest of other content',
      (m: WorkspaceReply[]) =>
        m.map((p) => (p.kind === 'manifest' ? { ...p, total: p.total - 1, files: p.files.slice(1) } : p)),
      /not sha256/,
    ],
    [
      'a manifest serving .env',
      (m: WorkspaceReply[]) =>
        m.map((p) =>
          p.kind === 'manifest'
            ? {
                ...p,
                files: p.files.map((f) =>
                  f.path === '.env' ? { ...f, withheld: false, chunks: ['0'.repeat(64)] } : f,
                ),
              }
            : p,
        ),
      /deny-list/,
    ],
    [
      'a path escaping the root',
      (m: WorkspaceReply[]) =>
        m.map((p) =>
          p.kind === 'manifest'
            ? { ...p, files: p.files.map((f, i) => (i === 1 ? { ...f, path: '../../x' } : f)) }
            : p,
        ),
      /unsafe path/,
    ],
  ])(
    'drops a holder that sends %s as an offence and takes the manifest from another',
    async (_, spoil, why) => {
      const offences: string[] = [];
      const bad = await liar((req) => spoil(honestPage(req)));
      const good = await holder();
      const got = await fetchWorkspace({
        host: client,
        id: ID(),
        holders: [bad.peerId.toString(), good.peerId.toString()],
        dir: dest.dir,
        onOffence: (_peer, w) => offences.push(w),
      });
      await expectExactTree(got.root);
      expect(offences).toHaveLength(1);
      expect(offences[0]).toMatch(why);
    },
  );

  it('catches a manifest whose chunk hashes are of other bytes than its files: an offence, and nothing lands', async () => {
    const size = served.manifest.files.find((f) => f.path === 'src/big.bin')!.size;
    const zeros = Buffer.alloc(CHUNK);
    const zeroChunk = sha256Of(zeros);
    const lastLen = size % CHUNK;
    const lastChunk = sha256Of(zeros.subarray(0, lastLen));
    const offences: string[] = [];
    const bad = await liar((req) =>
      req.kind === 'manifest'
        ? honestPage(req).map((p) =>
            p.kind === 'manifest'
              ? {
                  ...p,
                  files: p.files.map((f) =>
                    f.path === 'src/big.bin'
                      ? {
                          ...f,
                          chunks: f.chunks.map((_, i) => (i === f.chunks.length - 1 ? lastChunk : zeroChunk)),
                        }
                      : f,
                  ),
                }
              : p,
          )
        : req.hashes.map((hash) => ({
            kind: 'chunk' as const,
            hash,
            data: (hash === lastChunk
              ? zeros.subarray(0, lastLen)
              : hash === zeroChunk
                ? zeros
                : readServed(hash)
            ).toString('base64'),
          })),
    );
    const holders = [bad.peerId.toString()];
    await expect(
      fetchWorkspace({
        host: client,
        id: ID(),
        holders,
        dir: dest.dir,
        onOffence: (_p, w) => offences.push(w),
      }),
    ).rejects.toThrow(/src\/big.bin do not make its sha256/);
    expect(offences).toEqual([expect.stringMatching(/src\/big.bin/)]);
    expect(await readdir(dest.dir)).toEqual([]);
    // the next attempt, from an honest holder, starts over and succeeds
    const good = await holder();
    await expectExactTree(
      (await fetchWorkspace({ host: client, id: ID(), holders: [good.peerId.toString()], dir: dest.dir }))
        .root,
    );
  });

  it('keeps to the bandwidth cap', async () => {
    const rate = 40 * CHUNK;
    const a = await holder({ bytesPerSecond: rate });
    const started = Date.now();
    const got = await fetchWorkspace({
      host: client,
      id: ID(),
      holders: [a.peerId.toString()],
      dir: dest.dir,
    });
    const elapsed = Date.now() - started;
    const bytes = got.fetched * CHUNK; // an upper bound: the last chunks are short
    expect(elapsed).toBeGreaterThanOrEqual(((bytes - 3 * CHUNK) / rate) * 1000 * 0.9);
  });

  it('fails, naming each holder, when none is left; nothing lands in place', async () => {
    const gone = await liar(() => [{ kind: 'refused', code: 'unknown-workspace', message: 'no' }]);
    await expect(
      fetchWorkspace({ host: client, id: ID(), holders: [gone.peerId.toString()], dir: dest.dir }),
    ).rejects.toThrow(/no holder served its manifest.*unknown-workspace/);
    expect(await readdir(dest.dir)).not.toContain(workspaceDirName(ID()));
  });
});
