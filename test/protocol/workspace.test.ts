import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseJsonWith } from '../../protocol/parse.ts';
import {
  type ChunkReply,
  checkChunk,
  chunkCount,
  chunkRange,
  contentIdOf,
  deniedPath,
  MAX_CHUNK_BYTES,
  MAX_CHUNKS_PER_REQUEST,
  MAX_WORKSPACE_FRAME_BYTES,
  type Manifest,
  type ManifestFile,
  manifestProblems,
  sha256Of,
  unsafePath,
  WorkspaceReply,
  WorkspaceRequest,
} from '../../protocol/workspace.ts';

const hex = (s: string) => sha256Of(Buffer.from(s));
const ID = `sha256:${'a'.repeat(64)}`;

/** A manifest of files with these contents, cut at chunkBytes, and its id. */
function manifestOf(contents: Record<string, string>, chunkBytes = 4): Manifest {
  const files: ManifestFile[] = Object.keys(contents)
    .sort()
    .map((path) => {
      const bytes = Buffer.from(contents[path]!);
      const withheld = deniedPath(path);
      const chunks = withheld
        ? []
        : Array.from({ length: chunkCount(bytes.length, chunkBytes) }, (_, i) => {
            const { start, end } = chunkRange(bytes.length, chunkBytes, i);
            return sha256Of(bytes.subarray(start, end));
          });
      return { path, size: bytes.length, sha256: sha256Of(bytes), exec: false, withheld, chunks };
    });
  return { id: contentIdOf(files), chunkBytes, files };
}

describe('deny-list', () => {
  it.each([
    '.env',
    '.env.local',
    'packages/api/.env.production',
    '.ENV',
    '.envrc',
    '.npmrc',
    'sub/.npmrc',
    '.yarnrc',
    '.yarnrc.yml',
    '.netrc',
    '.pypirc',
    '.git-credentials',
    '.git/config',
    'vendor/lib/.git/HEAD',
    '.git',
    'keys/server.pem',
    'certs/TLS.KEY',
    'id_rsa',
    'home/.ssh/config',
    'deploy/id_ed25519',
    'deploy/id_ecdsa.pub',
    'a/b.p12',
    'a/b.pfx',
    '.aws/credentials',
  ])('withholds %s', (path) => {
    expect(deniedPath(path)).toBe(true);
  });

  it.each([
    'src/env.ts',
    'environment.md',
    'src/.environment/x.ts', // a directory named like .env* is fine: only the basename pattern counts
    'docs/keys.md',
    'src/keyboard.ts',
    'npmrc.md',
    'src/pem.ts',
    '.gitignore',
    '.github/workflows/ci.yml',
    'my.git/x',
    'package.json',
    'id.ts',
  ])('serves %s', (path) => {
    expect(deniedPath(path)).toBe(false);
  });
});

describe('paths', () => {
  it.each([
    ['', 'empty'],
    ['/etc/passwd', 'absolute'],
    ['../x', '".." segment'],
    ['a/../../x', '".." segment'],
    ['a/./b', '"." segment'],
    ['a//b', 'empty segment'],
    ['a/', 'empty segment'],
    ['a\\..\\b', 'backslash'],
    ['a\0b', 'NUL'],
    ['x'.repeat(1025), 'longer'],
  ])('refuses %j', (path, why) => {
    expect(unsafePath(path)).toContain(why);
  });

  it('accepts ordinary paths', () => {
    for (const p of ['a', 'src/index.ts', '.github/ci.yml', 'a..b/c', 'spaced name/ü.ts'])
      expect(unsafePath(p)).toBeNull();
  });
});

describe('chunking', () => {
  it('cuts a file into fixed-size chunks, the last one short, and an empty file into none', () => {
    expect(chunkCount(0, 4)).toBe(0);
    expect(chunkCount(1, 4)).toBe(1);
    expect(chunkCount(4, 4)).toBe(1);
    expect(chunkCount(5, 4)).toBe(2);
    expect(chunkRange(10, 4, 0)).toEqual({ start: 0, end: 4 });
    expect(chunkRange(10, 4, 2)).toEqual({ start: 8, end: 10 });
  });
});

describe('manifest ↔ content id', () => {
  const contents = { 'b.ts': 'export const b = 1;\n', 'a.ts': 'a', '.env': 'SECRET=1', empty: '' };

  it('hashes with the content-id formula: (path NUL sha256 LF) per file, sorted', () => {
    const m = manifestOf(contents);
    expect(manifestProblems(m, m.id)).toEqual([]);
    const h = createHash('sha256');
    for (const p of Object.keys(contents).sort())
      h.update(`${p}\0${hex(contents[p as keyof typeof contents])}\n`);
    expect(m.id).toBe(`sha256:${h.digest('hex')}`);
  });

  it('withholds the deny-listed file but keeps its hash in the id', () => {
    const env = manifestOf(contents).files.find((f) => f.path === '.env')!;
    expect(env).toMatchObject({ withheld: true, chunks: [] });
  });

  it('names every way a manifest fails its id', () => {
    const m = manifestOf(contents);
    const cases: [string, (x: Manifest) => void, RegExp][] = [
      ['other id', (x) => (x.id = ID), /manifest is for/],
      ['changed content', (x) => (x.files[1]!.sha256 = hex('other')), /files hash to/],
      ['renamed file', (x) => (x.files[1]!.path = 'a2.ts'), /files hash to/],
      ['dropped file', (x) => x.files.splice(1, 1), /files hash to/],
      ['unsorted', (x) => x.files.reverse(), /not sorted/],
      ['duplicate', (x) => x.files.splice(1, 0, { ...x.files[1]! }), /not sorted/],
      [
        'served secret',
        (x) => Object.assign(x.files[0]!, { withheld: false, chunks: [hex('S')] }),
        /deny-list but not withheld/,
      ],
      [
        'withheld code',
        (x) => Object.assign(x.files[1]!, { withheld: true, chunks: [] }),
        /withheld but not on the deny-list/,
      ],
      ['missing chunk', (x) => x.files[2]!.chunks.pop(), /chunk hashes, expected/],
      ['extra chunk', (x) => x.files[2]!.chunks.push(hex('x')), /chunk hashes, expected/],
      ['chunkBytes 0', (x) => (x.chunkBytes = 0), /chunkBytes/],
      ['chunkBytes huge', (x) => (x.chunkBytes = MAX_CHUNK_BYTES + 1), /chunkBytes/],
    ];
    for (const [name, spoil, problem] of cases) {
      const copy = structuredClone(m);
      spoil(copy);
      expect(manifestProblems(copy, m.id).join('\n'), name).toMatch(problem);
    }
  });
});

describe('wire messages', () => {
  const parse = (schema: typeof WorkspaceRequest | typeof WorkspaceReply, v: unknown) =>
    parseJsonWith(schema, JSON.stringify(v), 'msg #1 from peer');

  it('accepts the requests and replies', () => {
    expect(parse(WorkspaceRequest, { v: 1, kind: 'manifest', id: ID, from: 0 })).toMatchObject({
      kind: 'manifest',
    });
    expect(parse(WorkspaceRequest, { v: 1, kind: 'chunks', id: ID, hashes: [hex('a')] })).toMatchObject({
      kind: 'chunks',
    });
    const m = manifestOf({ 'a.ts': 'abcdefgh' });
    const page = { kind: 'manifest', id: m.id, chunkBytes: 4, total: 1, from: 0, files: m.files };
    expect(parse(WorkspaceReply, page)).toEqual(page);
    expect(parse(WorkspaceReply, { kind: 'refused', code: 'busy', message: 'later' })).toMatchObject({
      code: 'busy',
    });
  });

  it.each([
    ['wrong version', { v: 2, kind: 'manifest', id: ID, from: 0 }, 'v'],
    ['bad id', { v: 1, kind: 'manifest', id: 'sha256:xyz', from: 0 }, 'id'],
    ['negative page', { v: 1, kind: 'manifest', id: ID, from: -1 }, 'from'],
    ['no hashes', { v: 1, kind: 'chunks', id: ID, hashes: [] }, 'hashes'],
    [
      'too many hashes',
      {
        v: 1,
        kind: 'chunks',
        id: ID,
        hashes: Array.from({ length: MAX_CHUNKS_PER_REQUEST + 1 }, (_, i) => hex(`${i}`)),
      },
      'hashes',
    ],
    ['repeated hashes', { v: 1, kind: 'chunks', id: ID, hashes: [hex('a'), hex('a')] }, 'hashes'],
    ['uppercase hash', { v: 1, kind: 'chunks', id: ID, hashes: [hex('a').toUpperCase()] }, 'hashes.0'],
    ['unknown kind', { v: 1, kind: 'tarball', id: ID }, 'kind'],
  ])('refuses a request with %s, naming the field', (_, msg, field) => {
    expect(() => parse(WorkspaceRequest, msg)).toThrow(
      new RegExp(`msg #1 from peer: .*${field.replace('.', '\\.')}`),
    );
  });

  it.each([
    ['a traversing path', { path: '../../.ssh/authorized_keys' }, 'files.0.path'],
    ['an absolute path', { path: '/etc/cron.d/x' }, 'files.0.path'],
    ['a negative size', { size: -1 }, 'files.0.size'],
    ['a short hash', { sha256: 'abc' }, 'files.0.sha256'],
  ])('refuses a manifest page with %s', (_, spoil, field) => {
    const m = manifestOf({ 'a.ts': 'abcdefgh' });
    const page = {
      kind: 'manifest',
      id: m.id,
      chunkBytes: 4,
      total: 1,
      from: 0,
      files: [{ ...m.files[0], ...spoil }],
    };
    expect(() => parse(WorkspaceReply, page)).toThrow(field);
  });

  it('refuses a chunk that is not base64 or larger than a chunk may be', () => {
    expect(() => parse(WorkspaceReply, { kind: 'chunk', hash: hex('a'), data: '%%%' })).toThrow(
      /data: expected base64/,
    );
    const big = Buffer.alloc(MAX_CHUNK_BYTES + 3).toString('base64');
    expect(() => parse(WorkspaceReply, { kind: 'chunk', hash: hex('a'), data: big })).toThrow(/data/);
    // the largest legal chunk fits a frame
    const max = JSON.stringify({
      kind: 'chunk',
      hash: hex('a'),
      data: Buffer.alloc(MAX_CHUNK_BYTES).toString('base64'),
    });
    expect(Buffer.byteLength(max)).toBeLessThanOrEqual(MAX_WORKSPACE_FRAME_BYTES);
  });
});

describe('checkChunk', () => {
  const bytes = Buffer.from('hello chunk');
  const h = sha256Of(bytes);
  const reply = (hash: string, data: Buffer): ChunkReply => ({
    kind: 'chunk',
    hash,
    data: data.toString('base64'),
  });

  it('returns the bytes of the chunk asked for', () => {
    expect(checkChunk(reply(h, bytes), h)).toEqual({ bytes });
  });
  it('refuses another chunk than the one asked for', () => {
    expect(checkChunk(reply(hex('x'), Buffer.from('x')), h)).toMatchObject({
      problem: expect.stringMatching(/expected/),
    });
  });
  it('refuses bytes that do not hash to the claimed hash', () => {
    expect(checkChunk(reply(h, Buffer.from('hello chunK')), h)).toMatchObject({
      problem: expect.stringMatching(/hashing to/),
    });
  });
  it('refuses a truncated chunk', () => {
    expect(checkChunk(reply(h, bytes.subarray(0, 5)), h)).toMatchObject({
      problem: expect.stringMatching(/hashing to/),
    });
  });
});
