import { mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StorageError } from '../../node/storage/errors.ts';
import { decodeMark, decodeSlot, encodeSlot, openSeqMark, SLOT_BYTES } from '../../node/worker/seq-mark.ts';
import { ParseError } from '../../protocol/parse.ts';

const O = '12D3KooWFq8v97XB7cJMrmLgvWKLxq35inx4SoVTQWFYH9GRCgFh';
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-seqmark-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const slotText = (o: object) => Buffer.from(`${JSON.stringify(o)}`.padEnd(SLOT_BYTES - 1, ' ') + '\n');

describe('mark slots', () => {
  it('encode to one fixed-size JSON line and decode back', () => {
    const b = encodeSlot(O, 42);
    expect(b.length).toBe(SLOT_BYTES);
    expect(b.at(-1)).toBe(0x0a);
    expect(decodeSlot(b, 'f')).toMatchObject({ v: 1, origin: O, seq: 42 });
    expect(() => encodeSlot('x'.repeat(300), 1)).toThrow(RangeError);
  });

  it('a torn, edited, empty or malformed slot is not valid, and says why', () => {
    const good = JSON.parse(encodeSlot(O, 7).toString()) as Record<string, unknown>;
    const bad: [Buffer, RegExp][] = [
      [Buffer.alloc(SLOT_BYTES), /empty/],
      [Buffer.from(' '.repeat(SLOT_BYTES)), /empty/],
      [Buffer.concat([encodeSlot(O, 7).subarray(0, 30), Buffer.alloc(SLOT_BYTES - 30)]), /not JSON/],
      [slotText({ ...good, seq: 8 }), /check: does not match/],
      [slotText({ ...good, origin: 'someone-else' }), /check: does not match/],
      [slotText({ ...good, seq: -1 }), /seq/],
      [slotText({ ...good, seq: 1.5 }), /seq/],
      [slotText({ ...good, seq: '7' }), /seq/],
      [slotText({ ...good, v: 2 }), /v:/],
      [slotText({ ...good, extra: 1 }), /extra|unrecognized/i],
      [slotText({ ...good, check: 'zz' }), /check/],
      [slotText({ v: 1, seq: 7, check: good.check }), /origin/],
    ];
    for (const [bytes, why] of bad) {
      const r = decodeSlot(bytes, 'mark slot');
      expect(r, bytes.toString()).toBeInstanceOf(ParseError);
      expect((r as ParseError).message).toMatch(/^mark slot: /);
      expect((r as ParseError).message).toMatch(why);
    }
  });

  it('a mark is the higher valid slot; one torn slot falls back to the other; none valid or two origins throw', () => {
    const both = (a: Buffer, b: Buffer) => Buffer.concat([a, b]);
    expect(decodeMark(Buffer.alloc(0), 'f')).toBeNull();
    expect(decodeMark(both(encodeSlot(O, 3), encodeSlot(O, 4)), 'f')).toMatchObject({
      slot: { seq: 4 },
      index: 1,
    });
    expect(decodeMark(both(encodeSlot(O, 9), encodeSlot(O, 4)), 'f')).toMatchObject({
      slot: { seq: 9 },
      index: 0,
    });
    expect(decodeMark(both(Buffer.alloc(SLOT_BYTES, 7), encodeSlot(O, 4)), 'f')).toMatchObject({
      slot: { seq: 4 },
      index: 1,
    });
    expect(decodeMark(both(encodeSlot(O, 5), Buffer.alloc(SLOT_BYTES, 7)), 'f')).toMatchObject({ index: 0 });
    // A file cut inside the second slot: the first still counts.
    expect(
      decodeMark(both(encodeSlot(O, 5), encodeSlot(O, 6)).subarray(0, SLOT_BYTES + 10), 'f'),
    ).toMatchObject({
      slot: { seq: 5 },
    });
    expect(() => decodeMark(Buffer.alloc(2 * SLOT_BYTES, 0x41), 'f')).toThrow(/^f: .*no valid slot/);
    expect(() => decodeMark(both(encodeSlot(O, 1), encodeSlot('other', 2)), 'f')).toThrow(/two origins/);
  });
});

describe('the mark file', () => {
  it('starts at 0, survives reopening, never goes down', async () => {
    const path = join(dir, 'samples.seq');
    const m = openSeqMark(path, O);
    expect(m.created).toBe(true);
    expect(m.value()).toBe(0);
    expect((await stat(path)).size).toBe(2 * SLOT_BYTES);
    m.advance(5);
    m.advance(3);
    expect(m.value()).toBe(5);
    m.close();
    const again = openSeqMark(path, O);
    expect(again.created).toBe(false);
    expect(again.value()).toBe(5);
    again.advance(6);
    again.close();
    expect(openSeqMark(path, O).value()).toBe(6);
  });

  it('writes the older slot each time, so a torn write keeps the previous mark', async () => {
    const path = join(dir, 'samples.seq');
    const m = openSeqMark(path, O);
    for (let s = 1; s <= 5; s++) m.advance(s);
    m.close();
    const seqs = async () => {
      const b = await readFile(path);
      return [0, 1].map((i) => decodeSlot(b.subarray(i * SLOT_BYTES, (i + 1) * SLOT_BYTES), 'f'));
    };
    // The two slots hold the last two marks.
    expect((await seqs()).map((s) => (s as { seq: number }).seq).sort()).toEqual([4, 5]);
    // Tear the newest slot: the mark falls back to the previous value (5 was being written, so not published).
    const newest = (await seqs()).findIndex((s) => (s as { seq: number }).seq === 5);
    const fh = await open(path, 'r+');
    await fh.write(Buffer.alloc(40, 0x7b), 0, 40, newest * SLOT_BYTES + 10);
    await fh.close();
    const reopened = openSeqMark(path, O);
    expect(reopened.value()).toBe(4);
    // The next write goes over the torn slot, never over the good one.
    reopened.advance(5);
    reopened.close();
    expect((await seqs()).every((s) => !(s instanceof ParseError))).toBe(true);
    expect(openSeqMark(path, O).value()).toBe(5);
  });

  it('a mark file of another node, or with no valid slot, is refused with its path', async () => {
    const path = join(dir, 'samples.seq');
    openSeqMark(path, O).close();
    expect(() => openSeqMark(path, 'another-peer')).toThrow(
      new RegExp(`^${path}: this sequence mark belongs to peer ${O}, not another-peer`),
    );
    await writeFile(path, 'garbage'.repeat(100));
    let thrown: unknown;
    try {
      openSeqMark(path, O);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(StorageError);
    expect((thrown as StorageError).message).toMatch(
      new RegExp(`^${path}: the sample log's sequence mark is corrupt`),
    );
    expect((thrown as StorageError).message).toMatch(/delete this file/);
  });
});
