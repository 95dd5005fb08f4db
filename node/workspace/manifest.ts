import { open, realpath, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import {
  chunkCount,
  chunkRange,
  DEFAULT_CHUNK_BYTES,
  deniedPath,
  type Manifest,
  type ManifestFile,
  manifestProblems,
  sha256Of,
} from '../../protocol/workspace.ts';
import { workspaceIdentity } from './content-id.ts';

/** Where a chunk's bytes are in a served workspace. */
export interface ChunkLocation {
  /** Workspace-relative path of a file holding the chunk. */
  path: string;
  /** Byte range [start, end). */
  start: number;
  end: number;
}

/** A workspace ready to serve: its manifest and where each chunk's bytes are. */
export interface ServedWorkspace {
  /** Absolute root. */
  root: string;
  manifest: Manifest;
  /** Chunk sha256 hex → one place it is found (identical chunks are served from the first). */
  chunks: Map<string, ChunkLocation>;
}

export interface BuildManifestOptions {
  /** Chunk size, bytes (default DEFAULT_CHUNK_BYTES). */
  chunkBytes?: number;
  /** Stops the build between files. */
  signal?: AbortSignal;
}

async function readRange(path: string, start: number, end: number): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const buf = Buffer.alloc(end - start);
    let done = 0;
    while (done < buf.length) {
      const { bytesRead } = await handle.read(buf, done, buf.length - done, start + done);
      if (bytesRead === 0) throw new Error(`${path}: shorter than expected (${start + done} bytes)`);
      done += bytesRead;
    }
    return buf;
  } finally {
    await handle.close();
  }
}

/** Reads one chunk of a served workspace and checks it still hashes to `hash` (the file may have changed). */
export async function readChunk(served: ServedWorkspace, hash: string): Promise<Buffer | null> {
  const at = served.chunks.get(hash);
  if (!at) return null;
  const bytes = await readRange(join(served.root, at.path), at.start, at.end);
  if (sha256Of(bytes) !== hash)
    throw new Error(`workspace ${served.root}: ${at.path} changed since it was indexed (chunk ${hash})`);
  return bytes;
}

/**
 * Indexes a workspace for serving: the files of its content id (tracked only, under git), each
 * hashed whole and per chunk. Refuses a tracked file that resolves outside the root (a symlink to
 * a home directory's secrets), and a tree that changes while it is read (the id would not verify).
 */
export async function buildManifest(
  root: string,
  options: BuildManifestOptions = {},
): Promise<ServedWorkspace> {
  const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  const identity = await workspaceIdentity(root);
  const realRoot = await realpath(root);
  const files: ManifestFile[] = [];
  const chunks = new Map<string, ChunkLocation>();
  for (const path of identity.files) {
    options.signal?.throwIfAborted();
    const full = join(root, path);
    const real = await realpath(full);
    if (real !== realRoot && !real.startsWith(realRoot + sep))
      throw new Error(`workspace ${root}: ${path} resolves outside the workspace (${real}); not serving it`);
    const info = await stat(real);
    const withheld = deniedPath(path);
    const whole = await readRange(real, 0, info.size);
    const hashes: string[] = [];
    if (!withheld) {
      for (let i = 0; i < chunkCount(whole.length, chunkBytes); i++) {
        const { start, end } = chunkRange(whole.length, chunkBytes, i);
        const h = sha256Of(whole.subarray(start, end));
        hashes.push(h);
        if (!chunks.has(h)) chunks.set(h, { path, start, end });
      }
    }
    files.push({
      path,
      size: whole.length,
      sha256: sha256Of(whole),
      exec: (info.mode & 0o111) !== 0,
      withheld,
      chunks: hashes,
    });
  }
  const manifest: Manifest = { id: identity.id, chunkBytes, files };
  const problems = manifestProblems(manifest, identity.id);
  if (problems.length > 0)
    throw new Error(`workspace ${root} changed while it was indexed: ${problems.slice(0, 3).join('; ')}`);
  return { root, manifest, chunks };
}

/** A fetched workspace to serve on: its verified manifest, the chunks located in its files under `root`. */
export function servedFromManifest(root: string, manifest: Manifest): ServedWorkspace {
  const chunks = new Map<string, ChunkLocation>();
  for (const f of manifest.files) {
    for (const [i, h] of f.chunks.entries()) {
      if (!chunks.has(h)) chunks.set(h, { path: f.path, ...chunkRange(f.size, manifest.chunkBytes, i) });
    }
  }
  return { root, manifest, chunks };
}
