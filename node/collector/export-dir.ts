import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile, realpath, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, sep } from 'node:path';
import { z } from 'zod';
import { ParseError, parseJsonWith } from '../../protocol/parse.ts';
import { pidAlive } from '../../sandbox/pid.ts';
import { logger } from '../logger.ts';
import { storageErrorOf } from '../storage/errors.ts';

const log = logger('vtnode:collector:export');

/**
 * Where an export goes: a fresh folder, or one a previous `vtnode export` wrote, replaced as a whole.
 * The new export is written into a temporary folder beside the target, then swapped in, so no file
 * of an older export survives beside the new manifest, and a crash while writing leaves the old
 * export as it was.
 */

/** The name of an export's manifest. */
export const MANIFEST = 'manifest.json';

/** What of a manifest.json tells that a folder is a vtnode export (the rest is not checked here). */
const PreviousManifest = z.object({
  /** The export's format. */
  format: z.enum(['mlx', 'hf', 'repair']),
  /** `vtnode <version>`. */
  generator: z.string().regex(/^vtnode /),
  /** The data files the export wrote (paths relative to the folder). */
  files: z.array(z.object({ path: z.string().min(1).max(1024) })).max(10_000),
});

/** What the target folder is. */
export type ExportTarget =
  | { kind: 'absent' }
  | { kind: 'empty' }
  | { kind: 'previous-export' }
  | {
      kind: 'foreign';
      /** Why it is not a previous export (names the files in the way). */
      reason: string;
    };

/**
 * Classifies a target folder from its contents: `entries` are its paths relative to it ('/'
 * separated, folders included; null when it does not exist), `manifest` the text of its manifest.json.
 * A previous export holds its manifest and the files that manifest lists, nothing else.
 */
export function classifyTarget(entries: readonly string[] | null, manifest: string | null): ExportTarget {
  if (entries === null) return { kind: 'absent' };
  if (entries.length === 0) return { kind: 'empty' };
  const shown = (xs: string[]) =>
    `${xs.slice(0, 5).join(', ')}${xs.length > 5 ? `, … (${xs.length} in all)` : ''}`;
  if (manifest === null)
    return { kind: 'foreign', reason: `it holds ${shown([...entries])} and no ${MANIFEST}` };
  let listed: Set<string>;
  try {
    const m = parseJsonWith(PreviousManifest, manifest, MANIFEST);
    listed = new Set(m.files.map((f) => f.path));
  } catch (err) {
    if (!(err instanceof ParseError)) throw err;
    return { kind: 'foreign', reason: `its ${MANIFEST} is not a vtnode export's (${err.message})` };
  }
  const folders = new Set<string>();
  for (const path of listed) {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) folders.add(parts.slice(0, i).join('/'));
  }
  const extra = entries.filter((e) => e !== MANIFEST && !listed.has(e) && !folders.has(e));
  if (extra.length > 0)
    return { kind: 'foreign', reason: `it holds ${shown(extra)}, which its ${MANIFEST} does not list` };
  return { kind: 'previous-export' };
}

/** The target is a non-empty folder that is not a previous export (and --force was not given). */
export class ExportTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExportTargetError';
  }
}

const TEMP_MARK = '.vtnode-export-';
const tempName = (target: string, role: 'new' | 'old') =>
  join(
    dirname(target),
    `.${basename(target)}${TEMP_MARK}${role}-${process.pid}-${randomBytes(4).toString('hex')}`,
  );

async function listTree(dir: string): Promise<string[] | null> {
  try {
    const entries = await readdir(dir, { recursive: true });
    return entries.map((e) => e.split(sep).join('/')).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Cleans up after an export that died: a temporary folder it was writing is removed; an old
 * export it had moved aside but not yet replaced (a crash between the two renames) is put back.
 */
export async function recoverTarget(target: string): Promise<void> {
  const parent = dirname(target);
  const prefix = `.${basename(target)}${TEMP_MARK}`;
  let names: string[];
  try {
    names = (await readdir(parent)).filter((n) => n.startsWith(prefix));
  } catch {
    return;
  }
  for (const name of names.sort()) {
    const m = /^(new|old)-(\d+)-[0-9a-f]+$/.exec(name.slice(prefix.length));
    if (!m || pidAlive(Number(m[2]))) continue;
    const path = join(parent, name);
    if (m[1] === 'old' && (await listTree(target)) === null) {
      log.warn(`${target}: an export died while replacing it; putting the previous export back from ${path}`);
      await rename(path, target);
    } else {
      log(`removing ${path}, left by an export that died`);
      await rm(path, { recursive: true, force: true });
    }
  }
}

function syncPath(path: string): void {
  let fd: number | null = null;
  try {
    fd = openSync(path, 'r');
    fsyncSync(fd);
  } catch {
    // A folder cannot be flushed on every platform; the files themselves were.
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

async function writeFlushed(path: string, text: string): Promise<void> {
  const fh = await open(path, 'w');
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export interface WriteExportOptions {
  /** The target folder. */
  out: string;
  /** Files to write (relative path → text), manifest.json included. */
  files: ReadonlyMap<string, string>;
  /** Replace a non-empty folder that is not a previous export (its files are deleted). */
  force?: boolean;
}

/**
 * Writes an export's files into a temporary folder beside `out`, flushed, then swaps it in for
 * `out` (absent, empty, a previous export, or anything with `force`). A full disk or another write
 * error leaves `out` untouched and the temporary folder removed; the error names the file.
 */
export async function writeExport(options: WriteExportOptions): Promise<void> {
  let out = options.out;
  if ((await lstat(out).catch(() => null))?.isSymbolicLink()) out = await realpath(out);
  await mkdir(dirname(out), { recursive: true });
  await recoverTarget(out);
  const stat = await lstat(out).catch(() => null);
  if (stat && !stat.isDirectory()) throw new ExportTargetError(`--out ${out} is a file, not a folder`);
  const entries = await listTree(out);
  const manifest = entries?.includes(MANIFEST) ? await readFile(join(out, MANIFEST), 'utf8') : null;
  const target = classifyTarget(entries, manifest);
  if (target.kind === 'foreign' && !options.force)
    throw new ExportTargetError(
      `--out ${out} is not empty and not a previous vtnode export: ${target.reason}. ` +
        'Choose an empty or new folder, or pass --force to replace it and everything in it.',
    );

  const fresh = tempName(out, 'new');
  try {
    await mkdir(fresh);
    for (const [path, text] of [...options.files].sort(([a], [b]) => a.localeCompare(b))) {
      const file = join(fresh, path);
      await mkdir(dirname(file), { recursive: true });
      try {
        await writeFlushed(file, text);
      } catch (err) {
        throw storageErrorOf(join(out, path), 'the export', err);
      }
      if (path.includes('/')) syncPath(dirname(file));
    }
    syncPath(fresh);
  } catch (err) {
    await rm(fresh, { recursive: true, force: true });
    throw err;
  }

  if (entries === null) await rename(fresh, out);
  else {
    // Two renames: a crash between them leaves the old export beside the target, and the next
    // export puts it back (recoverTarget) before doing anything else.
    const old = tempName(out, 'old');
    await rename(out, old);
    await rename(fresh, out);
    syncPath(dirname(out));
    await rm(old, { recursive: true, force: true });
  }
  syncPath(dirname(out));
  if (target.kind === 'foreign') log.warn(`${out}: replaced a folder that was not a vtnode export (--force)`);
}
