import { createHash } from 'node:crypto';
import { z } from 'zod';
import { Sha256Id } from './task.ts';
import { PROTOCOL_PREFIX } from './topics.ts';

/**
 * /vtnode/workspace/1: a node that holds a workspace serves its manifest (every tracked file: path,
 * size, sha256, executable bit, chunk hashes) and its chunks, each addressed by its sha256. The
 * manifest hashes to the workspace content id tasks carry (node/workspace/content-id.ts), so a
 * fetcher verifies it against the id, then every chunk against the manifest on arrival. Files on
 * the deny-list are listed (their hash is part of the id) but withheld: their bytes never travel.
 */
export const WORKSPACE_PROTOCOL = `${PROTOCOL_PREFIX}/workspace/1`;

/** Default chunk size, bytes. */
export const DEFAULT_CHUNK_BYTES = 256 * 1024;
/** Largest chunk size a manifest may declare, bytes. */
export const MAX_CHUNK_BYTES = 512 * 1024;
/** Most manifest entries one reply frame carries. */
export const MAX_MANIFEST_FILES_PER_FRAME = 256;
/** Most files a workspace manifest may list. */
export const MAX_MANIFEST_FILES = 200_000;
/** Most chunks one request may ask for. */
export const MAX_CHUNKS_PER_REQUEST = 16;
/** Longest workspace-relative path, characters. */
export const MAX_PATH_CHARS = 1024;
/** Largest frame on /vtnode/workspace/1, bytes: one base64 chunk of MAX_CHUNK_BYTES plus its envelope. */
export const MAX_WORKSPACE_FRAME_BYTES = Math.ceil(MAX_CHUNK_BYTES / 3) * 4 + 16 * 1024;

const Hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits');

/** Why a workspace-relative path is unsafe to write under a root, or null when it is safe. */
export function unsafePath(path: string): string | null {
  if (path.length === 0) return 'empty';
  if (path.length > MAX_PATH_CHARS) return `longer than ${MAX_PATH_CHARS} characters`;
  if (path.includes('\0')) return 'contains NUL';
  if (path.includes('\\')) return 'contains a backslash';
  if (path.startsWith('/')) return 'absolute';
  for (const part of path.split('/')) {
    if (part === '') return 'has an empty segment';
    if (part === '.' || part === '..') return `has a "${part}" segment`;
  }
  return null;
}

/** A workspace-relative POSIX path that stays under the root it is joined to. */
export const WorkspacePath = z.string().superRefine((path, ctx) => {
  const why = unsafePath(path);
  if (why) ctx.addIssue({ code: 'custom', message: `unsafe path: ${why}` });
});

/** Basename patterns never served, even when tracked (case-insensitive): credentials and private keys. */
const DENIED_NAMES: RegExp[] = [
  /^\.env/, // .env, .env.local, .env.production, .envrc
  /^\.npmrc$/,
  /^\.yarnrc/, // .yarnrc, .yarnrc.yml
  /^\.netrc$/,
  /^\.pypirc$/,
  /^\.git-credentials$/,
  /^id_(rsa|dsa|ecdsa|ed25519)/, // ssh keys, and their .pub siblings
  /\.(pem|key|p12|pfx)$/,
];
/** Directory names whose contents are never served. */
const DENIED_DIRS = new Set(['.git', '.ssh', '.gnupg', '.aws']);

/** True when a workspace-relative path must never travel, tracked or not (see docs/workspaces.md). */
export function deniedPath(path: string): boolean {
  const parts = path.toLowerCase().split('/');
  const name = parts[parts.length - 1]!;
  if (parts.slice(0, -1).some((dir) => DENIED_DIRS.has(dir))) return true;
  if (DENIED_DIRS.has(name)) return true; // a tracked file (or submodule link) named like one
  return DENIED_NAMES.some((re) => re.test(name));
}

/** Chunks a file of `size` bytes splits into at `chunkBytes` (an empty file has none). */
export function chunkCount(size: number, chunkBytes: number): number {
  return Math.ceil(size / chunkBytes);
}

/** Byte range [start, end) of chunk `index` of a file of `size` bytes. */
export function chunkRange(size: number, chunkBytes: number, index: number): { start: number; end: number } {
  const start = index * chunkBytes;
  return { start, end: Math.min(size, start + chunkBytes) };
}

/** sha256 hex of bytes. */
export function sha256Of(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** One tracked file of a workspace. */
export const ManifestFile = z.object({
  /** Workspace-relative POSIX path. */
  path: WorkspacePath,
  /** Size, bytes. */
  size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** sha256 hex of the whole content (what the content id hashes). */
  sha256: Hex64,
  /** True when the file is executable (mode 755 rather than 644). Not covered by the id. */
  exec: z.boolean(),
  /** True when the path is on the deny-list: listed for the id, its bytes never served. */
  withheld: z.boolean(),
  /** sha256 hex of each chunk in order; empty when withheld or empty. */
  chunks: z.array(Hex64).max(Math.ceil(Number.MAX_SAFE_INTEGER / MAX_CHUNK_BYTES)),
});
export type ManifestFile = z.infer<typeof ManifestFile>;

/** A whole manifest, as assembled from its pages. */
export interface Manifest {
  /** The workspace content id it hashes to. */
  id: string;
  /** Chunk size every file is cut at, bytes. */
  chunkBytes: number;
  /** Every tracked file, sorted by path. */
  files: ManifestFile[];
}

/** The content id of a list of (path, sha256), sorted by path: the formula of node/workspace/content-id.ts. */
export function contentIdOf(files: readonly { path: string; sha256: string }[]): string {
  const h = createHash('sha256');
  for (const f of files) h.update(`${f.path}\0${f.sha256}\n`);
  return `sha256:${h.digest('hex')}`;
}

/**
 * Every way a manifest fails to be the workspace `id`, as messages naming the file; empty when it is
 * valid: files strictly sorted (the id's order), the deny-list withheld and nothing else, one chunk
 * hash per chunk, and the (path, sha256) list hashing to `id`.
 */
export function manifestProblems(manifest: Manifest, id: string): string[] {
  const problems: string[] = [];
  if (manifest.id !== id) problems.push(`manifest is for ${manifest.id}, not ${id}`);
  if (
    !Number.isInteger(manifest.chunkBytes) ||
    manifest.chunkBytes < 1 ||
    manifest.chunkBytes > MAX_CHUNK_BYTES
  )
    problems.push(`chunkBytes ${manifest.chunkBytes} is outside 1..${MAX_CHUNK_BYTES}`);
  if (manifest.files.length > MAX_MANIFEST_FILES) problems.push(`more than ${MAX_MANIFEST_FILES} files`);
  for (const [i, f] of manifest.files.entries()) {
    const prev = manifest.files[i - 1];
    if (prev && !(prev.path < f.path)) problems.push(`${f.path}: not sorted after ${prev.path}`);
    const denied = deniedPath(f.path);
    if (denied && !f.withheld) problems.push(`${f.path}: on the deny-list but not withheld`);
    if (!denied && f.withheld) problems.push(`${f.path}: withheld but not on the deny-list`);
    const want = f.withheld ? 0 : chunkCount(f.size, manifest.chunkBytes);
    if (f.chunks.length !== want)
      problems.push(`${f.path}: ${f.chunks.length} chunk hashes, expected ${want}`);
  }
  if (problems.length === 0 && contentIdOf(manifest.files) !== id)
    problems.push(`files hash to ${contentIdOf(manifest.files)}, not ${id}`);
  return problems;
}

/** Request: one page of the manifest of workspace `id`, from entry `from`. */
export const ManifestRequest = z.object({
  v: z.literal(1),
  kind: z.literal('manifest'),
  /** Content id of the workspace. */
  id: Sha256Id,
  /** Index of the first entry wanted. */
  from: z.number().int().min(0).max(MAX_MANIFEST_FILES),
});
export type ManifestRequest = z.infer<typeof ManifestRequest>;

/** Request: these chunks of workspace `id`, by sha256. */
export const ChunksRequest = z.object({
  v: z.literal(1),
  kind: z.literal('chunks'),
  /** Content id of the workspace. */
  id: Sha256Id,
  /** Chunk hashes wanted, at most MAX_CHUNKS_PER_REQUEST, no repeats. */
  hashes: z
    .array(Hex64)
    .min(1)
    .max(MAX_CHUNKS_PER_REQUEST)
    .refine((h) => new Set(h).size === h.length, { message: 'hashes repeat' }),
});
export type ChunksRequest = z.infer<typeof ChunksRequest>;

/** Everything a fetcher sends: one request per stream. */
export const WorkspaceRequest = z.discriminatedUnion('kind', [ManifestRequest, ChunksRequest]);
export type WorkspaceRequest = z.infer<typeof WorkspaceRequest>;

/** Reply: one page of the manifest. */
export const ManifestPage = z.object({
  kind: z.literal('manifest'),
  id: Sha256Id,
  /** Chunk size of every file, bytes. */
  chunkBytes: z.number().int().min(1).max(MAX_CHUNK_BYTES),
  /** Entries in the whole manifest. */
  total: z.number().int().min(0).max(MAX_MANIFEST_FILES),
  /** Index of the first entry of this page. */
  from: z.number().int().min(0).max(MAX_MANIFEST_FILES),
  /** The entries, at most MAX_MANIFEST_FILES_PER_FRAME. */
  files: z.array(ManifestFile).max(MAX_MANIFEST_FILES_PER_FRAME),
});
export type ManifestPage = z.infer<typeof ManifestPage>;

/** Reply: one chunk, base64. */
export const ChunkReply = z.object({
  kind: z.literal('chunk'),
  /** sha256 hex of the decoded bytes (the fetcher checks it). */
  hash: Hex64,
  /** The bytes, base64 (at most MAX_CHUNK_BYTES decoded). */
  data: z
    .string()
    .max(Math.ceil(MAX_CHUNK_BYTES / 3) * 4)
    .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'expected base64'),
});
export type ChunkReply = z.infer<typeof ChunkReply>;

/** Reply: the request cannot be served (unknown workspace or chunk, server busy); nothing else follows. */
export const WorkspaceRefusal = z.object({
  kind: z.literal('refused'),
  code: z.enum(['unknown-workspace', 'unknown-chunk', 'busy']),
  message: z.string().max(500),
});
export type WorkspaceRefusal = z.infer<typeof WorkspaceRefusal>;

/** Everything a server sends. */
export const WorkspaceReply = z.discriminatedUnion('kind', [ManifestPage, ChunkReply, WorkspaceRefusal]);
export type WorkspaceReply = z.infer<typeof WorkspaceReply>;

/** Decodes a chunk reply and checks it is the chunk asked for: the bytes, or why not. */
export function checkChunk(reply: ChunkReply, want: string): { bytes: Buffer } | { problem: string } {
  if (reply.hash !== want) return { problem: `sent chunk ${reply.hash}, expected ${want}` };
  const bytes = Buffer.from(reply.data, 'base64');
  if (bytes.length > MAX_CHUNK_BYTES) return { problem: `chunk ${want} is ${bytes.length} bytes` };
  const got = sha256Of(bytes);
  if (got !== want) return { problem: `chunk ${want} has bytes hashing to ${got}` };
  return { bytes };
}
