// Storage faults for tests: real databases damaged in the ways disks and operators damage them, and
// small tmpfs mounts (root only) filled to the last byte.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openDatasetStore } from '../../node/collector/store.ts';
import type { DigestSigner } from '../../node/digests/signature.ts';
import { openCampaignStore } from '../../node/submitter/campaign-store.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { signedDigest } from './digests.ts';
import { sampleBody, sampleTask } from './samples.ts';

const run = promisify(execFile);

/** SQLite's default page size (every database here uses it). */
export const PAGE = 4096;

/** A sample log of `signer`'s node with `n` rows (each a few pages of candidate text), closed. */
export function buildSampleLog(path: string, signer: DigestSigner, n: number): void {
  const log = openSampleLog({ path, origin: signer.origin, signer });
  for (let i = 0; i < n; i++)
    log.append(
      sampleBody(`task-${i >> 3}`, 'qwen', i % 8, { candidate: `// ${i}\n${'x'.repeat(60)}\n`.repeat(80) }),
    );
  log.close();
}

/** A dataset index of `n` digests and bodies of `signer`'s node, closed. */
export function buildDataset(dir: string, signer: DigestSigner, n: number): void {
  const store = openDatasetStore(dir);
  for (let i = 0; i < n; i++) {
    const body = sampleBody(`task-${i >> 3}`, 'qwen', i % 8, {
      candidate: `// ${i}\n${'y'.repeat(60)}\n`.repeat(20),
    });
    const d = signedDigest(signer, i + 1, body);
    store.addDigest(d);
    store.putBody(d, body);
  }
  store.putTasks(Array.from({ length: Math.ceil(n / 8) }, (_, i) => sampleTask(`task-${i}`)));
  store.close();
}

/** A campaign store with one campaign of many slots, closed. */
export function buildCampaignStore(path: string): void {
  const store = openCampaignStore({ path });
  const spec = {
    name: 'c1',
    tasksHash: `sha256:${'a'.repeat(64)}`,
    models: ['qwen'],
    k: 8,
    sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase: 7 },
    split: 'all' as const,
  };
  const tasks = Array.from({ length: 300 }, (_, i) => ({
    id: `task-${i}-${'t'.repeat(100)}`,
    promptFingerprint: `sha256:${i.toString(16).padStart(64, '0')}`,
    split: 'train' as const,
  }));
  store.start({ spec, tasks, now: Date.now() });
  store.close();
}

/** Overwrites `count` whole pages from page `first` (0-based) with random bytes. */
export async function garbagePages(path: string, first: number, count: number): Promise<void> {
  const size = (await stat(path)).size;
  if ((first + count) * PAGE > size) throw new Error(`${path} has only ${size / PAGE} pages`);
  const fh = await open(path, 'r+');
  try {
    await fh.write(randomBytes(count * PAGE), 0, count * PAGE, first * PAGE);
  } finally {
    await fh.close();
  }
}

/** The ways a database file is found damaged, each applied to a closed, valid database at `path`. */
export const DAMAGES: {
  name: string;
  fault: 'corrupt' | 'not-a-database';
  apply(path: string): Promise<void>;
}[] = [
  {
    name: 'random bytes over the whole file',
    fault: 'not-a-database',
    apply: async (path) => writeFile(path, randomBytes((await stat(path)).size)),
  },
  {
    name: 'a text file',
    fault: 'not-a-database',
    apply: (path) => writeFile(path, 'hello, this is not a database\n'),
  },
  { name: 'cut to 50 bytes', fault: 'not-a-database', apply: (path) => truncate(path, 50) },
  {
    name: 'garbage over pages in the middle (header intact)',
    fault: 'corrupt',
    apply: async (path) => garbagePages(path, Math.floor((await stat(path)).size / PAGE / 2), 3),
  },
  {
    name: 'garbage over page 1 after the header',
    fault: 'corrupt',
    apply: async (path) => {
      const fh = await open(path, 'r+');
      try {
        await fh.write(randomBytes(PAGE - 100), 0, PAGE - 100, 100);
      } finally {
        await fh.close();
      }
    },
  },
  {
    name: 'cut in half',
    fault: 'corrupt',
    apply: async (path) => truncate(path, Math.floor((await stat(path)).size / PAGE / 2) * PAGE),
  },
];

/**
 * Whether this process can mount a tmpfs (root, with the right to mount: a container may deny it
 * even to root). Probed once by mounting and unmounting a tiny one.
 */
export async function canMountTmpfs(): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  const dir = await mkdtemp(join(tmpdir(), 'vt-mount-probe-'));
  try {
    await run('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]);
    await run('umount', [dir]);
    return true;
  } catch {
    return false;
  } finally {
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

/** True when this process can mount a tmpfs for a full-disk test (see canMountTmpfs). */
export const canMount = await canMountTmpfs();

/** Mounts a tmpfs of `bytes` at `dir` (root only). */
export async function mountTmpfs(dir: string, bytes: number): Promise<void> {
  await run('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir]);
}

/** Unmounts `dir` (lazily when busy, so a test's finally always gets its mount point back). */
export async function unmount(dir: string): Promise<void> {
  await run('umount', [dir]).catch(() => run('umount', ['-l', dir]));
}

/** Fills the file system of `dir` to the last byte with one file; returns its path (delete it to free). */
export async function fillDisk(dir: string): Promise<string> {
  const path = join(dir, `filler-${randomBytes(4).toString('hex')}`);
  const fh = await open(path, 'w');
  const chunk = Buffer.alloc(1 << 20, 0x61);
  try {
    for (;;) {
      try {
        await fh.write(chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
        break;
      }
    }
    // Then the last partial chunk's worth, byte pages at a time.
    const small = Buffer.alloc(4096, 0x61);
    for (;;) {
      try {
        await fh.write(small);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
        break;
      }
    }
  } finally {
    await fh.close();
  }
  return path;
}

/** Frees what fillDisk took. */
export async function freeDisk(filler: string): Promise<void> {
  await rm(filler, { force: true });
}
