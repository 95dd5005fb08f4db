import { closeSync, fdatasyncSync, fstatSync, fsyncSync, openSync, readSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { z } from 'zod';
import { sha256Hex } from '../../protocol/canonical.ts';
import { ParseError, parseJsonWith } from '../../protocol/parse.ts';
import { StorageError, storageErrorOf } from '../storage/errors.ts';

/**
 * The sample log's durable high-water mark, kept outside the database (and its WAL): the highest
 * sequence number this node may have published. It is written (and flushed to disk) before a row
 * with a higher seq is committed, so however the database loses rows (a truncated or deleted WAL,
 * an older backup restored, the file moved aside) the log never hands out a published seq again.
 *
 * The file holds two fixed-size slots written alternately in place; each is a JSON line with a
 * checksum, so a write torn by a crash spoils at most the slot being written, and the other still
 * holds the previous mark (which is all that was published: a mark is flushed before use).
 */

/** Bytes per slot (a JSON line padded with spaces, ending in a newline). */
export const SLOT_BYTES = 256;

const SeqMarkSlot = z.strictObject({
  /** Format version. */
  v: z.literal(1),
  /** Peer id of the node the log belongs to. */
  origin: z.string().min(1).max(128),
  /** Highest seq that may have been published. */
  seq: z.number().int().min(0),
  /** First 16 hex digits of sha256("<origin> <seq>"): a torn or edited slot does not match. */
  check: z.string().regex(/^[0-9a-f]{16}$/),
});
export type SeqMarkSlot = z.infer<typeof SeqMarkSlot>;

const checkOf = (origin: string, seq: number) => sha256Hex(`${origin} ${seq}`).slice(0, 16);

/** One slot's bytes: the JSON line, padded to SLOT_BYTES. */
export function encodeSlot(origin: string, seq: number): Buffer {
  const line = JSON.stringify({ v: 1, origin, seq, check: checkOf(origin, seq) });
  if (line.length > SLOT_BYTES - 1) throw new RangeError(`origin ${origin} is too long for a mark slot`);
  return Buffer.from(`${line.padEnd(SLOT_BYTES - 1, ' ')}\n`, 'utf8');
}

/** A slot's value, or the reason it is not valid (empty, torn, edited). */
export function decodeSlot(bytes: Buffer, input: string): SeqMarkSlot | ParseError {
  // A slot the file system zero-filled (a crash while the file grew) counts as empty too.
  const text = bytes.toString('utf8').replace(/\0/g, '').trim();
  if (!text) return new ParseError(input, [{ path: '', message: 'empty' }]);
  try {
    const slot = parseJsonWith(SeqMarkSlot, text, input);
    if (slot.check !== checkOf(slot.origin, slot.seq))
      return new ParseError(input, [
        { path: 'check', message: 'does not match origin and seq (torn or edited)' },
      ]);
    return slot;
  } catch (err) {
    if (err instanceof ParseError) return err;
    throw err;
  }
}

/**
 * The mark a file's bytes hold: the highest valid slot, and which slot it is. `null` for an empty file (created, never
 * written). Throws a ParseError when the file has bytes but no valid slot, or slots of two origins.
 */
export function decodeMark(bytes: Buffer, input: string): { slot: SeqMarkSlot; index: 0 | 1 } | null {
  if (bytes.length === 0) return null;
  const slot = (i: 0 | 1) =>
    decodeSlot(bytes.subarray(i * SLOT_BYTES, (i + 1) * SLOT_BYTES), `${input} slot ${i}`);
  const a = slot(0);
  const b = slot(1);
  const slots = [a, b];
  const valid = slots.filter((s): s is SeqMarkSlot => !(s instanceof ParseError));
  if (valid.length === 0) {
    const why = (slots as ParseError[]).flatMap((e) =>
      e.issues.map((i) => `${e.input}: ${i.path || '(root)'}: ${i.message}`),
    );
    throw new ParseError(input, [{ path: '', message: `no valid slot (${why.join('; ')})` }]);
  }
  if (valid.length === 2 && valid[0]!.origin !== valid[1]!.origin)
    throw new ParseError(input, [
      { path: 'origin', message: `slots name two origins, ${valid[0]!.origin} and ${valid[1]!.origin}` },
    ]);
  if (a instanceof ParseError) return { slot: b as SeqMarkSlot, index: 1 };
  if (b instanceof ParseError || a.seq >= b.seq) return { slot: a, index: 0 };
  return { slot: b, index: 1 };
}

export interface SeqMark {
  /** The file. */
  readonly path: string;
  /** Highest seq that may have been published (0 for a new mark). */
  value(): number;
  /** True when the file did not exist (or was empty) before this open. */
  readonly created: boolean;
  /** Raises the mark to `seq` and flushes it to disk before returning (no-op when not higher). */
  advance(seq: number): void;
  close(): void;
}

const WHAT = "the sample log's sequence mark";

/**
 * Opens (creating if needed) the mark file of `origin`'s sample log. A file of another origin, or
 * one with no valid slot, is refused with a StorageError naming it.
 */
export function openSeqMark(path: string, origin: string): SeqMark {
  let fd: number;
  try {
    // Owner only, like the sample log beside it.
    fd = openSync(path, 'a+', 0o600);
    closeSync(fd);
    fd = openSync(path, 'r+');
  } catch (err) {
    throw storageErrorOf(path, WHAT, err);
  }
  let current = 0;
  /** The slot the next advance writes: never the one holding the current mark. */
  let next: 0 | 1 = 0;
  let created = false;
  try {
    const size = fstatSync(fd).size;
    const bytes = Buffer.alloc(Math.min(size, 2 * SLOT_BYTES));
    readSync(fd, bytes, 0, bytes.length, 0);
    let mark: ReturnType<typeof decodeMark>;
    try {
      mark = decodeMark(bytes, path);
    } catch (err) {
      throw new StorageError({
        path,
        fault: 'corrupt',
        what: WHAT,
        detail: (err as Error).message,
        advice:
          'It records the highest sequence number the node has published. If samples.db beside it is intact, delete this file: the node writes it afresh from the log.',
      });
    }
    if (mark && mark.slot.origin !== origin)
      throw new Error(
        `${path}: this sequence mark belongs to peer ${mark.slot.origin}, not ${origin} (use the data dir of that node)`,
      );
    if (!mark) {
      created = true;
      // Both slots at 0, and the directory entry flushed, so the file survives a crash from now on.
      writeSync(fd, Buffer.concat([encodeSlot(origin, 0), encodeSlot(origin, 0)]), 0, 2 * SLOT_BYTES, 0);
      fsyncSync(fd);
      syncDir(dirname(path));
    } else {
      current = mark.slot.seq;
      next = mark.index === 0 ? 1 : 0;
    }
  } catch (err) {
    closeSync(fd);
    throw err instanceof StorageError || !(err as NodeJS.ErrnoException).code
      ? err
      : storageErrorOf(path, WHAT, err);
  }
  return {
    path,
    created,
    value: () => current,
    advance(seq) {
      if (seq <= current) return;
      try {
        // Overwrite the older slot: the newer one keeps the previous mark until this one is on disk.
        writeSync(fd, encodeSlot(origin, seq), 0, SLOT_BYTES, next * SLOT_BYTES);
        fdatasyncSync(fd);
      } catch (err) {
        throw storageErrorOf(path, WHAT, err);
      }
      next = next === 0 ? 1 : 0;
      current = seq;
    },
    close() {
      closeSync(fd);
    },
  };
}

function syncDir(dir: string): void {
  let fd: number | null = null;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Not every platform lets a directory be flushed; the file's own flush still holds.
  } finally {
    if (fd !== null) closeSync(fd);
  }
}
