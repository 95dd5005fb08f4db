import { describe, expect, it } from 'vitest';
import { createFleetView } from '../../placement/fleet-view.ts';
import { seededRandom } from '../../placement/seeded-random.ts';
import { Advert as AdvertSchema, MAX_ADVERT_WARM, type WarmEntry } from '../../protocol/advert.ts';
import {
  applyWarmDelta,
  createWarmEncoder,
  diffWarm,
  resolveWarm,
  WARM_FULL_EVERY,
} from '../../protocol/warm-delta.ts';
import { advert, sid } from '../helpers/adverts.ts';

const entry = (i: number, model = 'coder'): WarmEntry => ({ prompt: sid(`prompt-${i}`), model });
const list = (...ids: number[]) => ids.map((i) => entry(i));

/** One LRU step as a node's warm set takes it: use a prompt (to the front), add one, or drop one. */
function step(current: WarmEntry[], rnd: () => number, next: { id: number }): WarmEntry[] {
  const r = rnd();
  if (r < 0.35 && current.length > 0) {
    const e = current[Math.floor(rnd() * current.length)]!;
    return [e, ...current.filter((x) => x !== e)];
  }
  if (r < 0.9) return [entry(next.id++, rnd() < 0.2 ? 'other' : 'coder'), ...current].slice(0, 64);
  if (r < 0.95 && current.length > 0) {
    const drop = Math.floor(rnd() * current.length);
    return current.filter((_, i) => i !== drop);
  }
  return current;
}

describe('warm list deltas: the pure parts', () => {
  it('applies a front move, an insert, an eviction at the cap, and no change', () => {
    expect(applyWarmDelta(list(1, 2, 3), { front: [entry(3)], drop: [], len: 3 })).toEqual(list(3, 1, 2));
    expect(applyWarmDelta(list(1, 2, 3), { front: [entry(9)], drop: [], len: 4 })).toEqual(list(9, 1, 2, 3));
    expect(applyWarmDelta(list(1, 2, 3), { front: [entry(9)], drop: [], len: 3 })).toEqual(list(9, 1, 2));
    expect(applyWarmDelta(list(1, 2, 3), { front: [], drop: [], len: 3 })).toEqual(list(1, 2, 3));
    expect(applyWarmDelta(list(1, 2, 3), { front: [], drop: [], len: 0 })).toEqual([]);
    expect(applyWarmDelta(list(1, 2, 3), { front: [entry(9)], drop: list(2), len: 3 })).toEqual(
      list(9, 1, 3),
    );
  });

  it('tells entries of the same prompt on different models apart', () => {
    const a = { prompt: sid('p'), model: 'a' };
    const b = { prompt: sid('p'), model: 'b' };
    expect(applyWarmDelta([a, b], { front: [b], drop: [], len: 2 })).toEqual([b, a]);
  });

  it('finds the smallest front, names only the drops before the cut, and gives up on a list with repeats', () => {
    expect(diffWarm(list(1, 2, 3), list(1, 2, 3))).toEqual({ front: [], drop: [], len: 3 });
    expect(diffWarm(list(1, 2, 3), list(3, 1, 2))).toEqual({ front: list(3), drop: [], len: 3 });
    expect(diffWarm(list(1, 2, 3), list(8, 9, 1, 2))).toEqual({ front: list(8, 9), drop: [], len: 4 });
    expect(diffWarm(list(1, 2, 3, 4), list(1, 2, 4))).toEqual({ front: [], drop: list(3), len: 3 });
    expect(diffWarm(list(1, 2, 3, 4, 5), list(7, 1, 3))).toEqual({ front: list(7), drop: list(2), len: 3 });
    expect(diffWarm(list(1, 2, 3), list(3, 2, 1))).toEqual({ front: list(3, 2), drop: [], len: 3 });
    expect(diffWarm([], list(1))).toEqual({ front: list(1), drop: [], len: 1 });
    expect(diffWarm(list(1, 2), [])).toEqual({ front: [], drop: [], len: 0 });
    expect(diffWarm(list(1), list(2, 2))).toBeNull();
  });

  it('round-trips every change of a random walk: apply(old, diff(old, new)) is new', () => {
    const rnd = seededRandom(7);
    const next = { id: 0 };
    let old: WarmEntry[] = [];
    for (let i = 0; i < 2000; i++) {
      const now = step(old, rnd, next);
      const d = diffWarm(old, now);
      expect(d).not.toBeNull();
      expect(applyWarmDelta(old, d!)).toEqual(now);
      old = now;
    }
  });

  it('the encoder sends the whole list first, every WARM_FULL_EVERY-th advert, when forced, and when a delta is as long', () => {
    const enc = createWarmEncoder(4);
    expect(enc.encode(list(1, 2))).toEqual({ warm: list(1, 2), warmRev: 0 });
    const delta = (from: number, front: WarmEntry[], len: number, drop: WarmEntry[] = []) => ({
      from,
      front,
      drop,
      len,
    });
    expect(enc.encode(list(1, 2))).toEqual({ warm: [], warmRev: 0, warmDelta: delta(0, [], 2) });
    expect(enc.encode(list(3, 1, 2))).toEqual({ warm: [], warmRev: 1, warmDelta: delta(0, list(3), 3) });
    expect(enc.encode(list(3, 1, 2))).toEqual({ warm: [], warmRev: 1, warmDelta: delta(1, [], 3) });
    expect(enc.encode(list(3, 1, 2))).toEqual({ warm: list(3, 1, 2), warmRev: 1 });
    expect(enc.encode(list(3, 1, 2), true)).toEqual({ warm: list(3, 1, 2), warmRev: 1 });
    expect(enc.encode(list(3, 2))).toEqual({ warm: [], warmRev: 2, warmDelta: delta(1, [], 2, list(1)) });
    expect(enc.encode(list(2, 3))).toEqual({ warm: [], warmRev: 3, warmDelta: delta(2, list(2), 2) });
    expect(enc.encode(list(5, 4))).toEqual({ warm: list(5, 4), warmRev: 4 });
    expect(WARM_FULL_EVERY).toBeGreaterThan(1);
  });

  it('a receiver that loses adverts never holds a list the sender did not have, and catches up at the next whole list', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const rnd = seededRandom(seed);
      const next = { id: 0 };
      const enc = createWarmEncoder();
      const history = new Map<number, WarmEntry[]>();
      let current: WarmEntry[] = [];
      let held: ReturnType<typeof advert> | undefined;
      let lostSinceWhole = false;
      for (let seq = 1; seq <= 1500; seq++) {
        current = step(current, rnd, next);
        const fields = enc.encode(current);
        history.set(fields.warmRev!, current);
        const sent = AdvertSchema.parse({ ...advert('p'), seq, ...fields });
        if (fields.warmDelta === undefined) lostSinceWhole = false;
        if (rnd() < 0.1) {
          lostSinceWhole = true;
          continue;
        }
        held = resolveWarm(sent, held);
        if (held.warmRev !== undefined) expect(held.warm).toEqual(history.get(held.warmRev));
        else expect(held.warm).toEqual([]);
        if (!lostSinceWhole) expect(held.warm).toEqual(current);
      }
    }
  });

  it('rejects a delta advert with a warm list, without a revision, or from a later revision', () => {
    const delta = { from: 1, front: [], drop: [], len: 0 };
    expect(AdvertSchema.safeParse({ ...advert('p'), warmRev: 1, warmDelta: delta }).success).toBe(true);
    const bad = [
      { warm: list(1), warmRev: 1, warmDelta: delta },
      { warmDelta: delta },
      { warmRev: 0, warmDelta: delta },
      { warmRev: 1, warmDelta: { ...delta, len: MAX_ADVERT_WARM + 1 } },
      { warmRev: -1 },
    ];
    for (const extra of bad) {
      const r = AdvertSchema.safeParse({ ...advert('p'), ...extra });
      expect(r.success, JSON.stringify(extra)).toBe(false);
    }
    // An advert from a node older than deltas (no warmRev) is still accepted, whole.
    expect(AdvertSchema.safeParse({ ...advert('p'), warm: list(1) }).success).toBe(true);
  });

  it('a delta advert is a fraction of the whole one for a full list after one new prompt', () => {
    const enc = createWarmEncoder();
    const full = Array.from({ length: 64 }, (_, i) => entry(i));
    const first = { ...advert('p'), ...enc.encode(full) };
    const after = { ...advert('p'), ...enc.encode([entry(100), ...full.slice(0, 63)]) };
    const bytes = (a: object) => JSON.stringify(a).length;
    expect(after.warmDelta).toBeDefined();
    expect(bytes(after)).toBeLessThan(bytes(first) / 4);
  });
});

describe('warm list deltas in the fleet view', () => {
  it('holds whole lists: a delta to the held revision applies, one to another keeps the held list', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    const enc = createWarmEncoder();
    const at = (seq: number, warm: WarmEntry[]) =>
      AdvertSchema.parse({ ...advert('p'), seq, ...enc.encode(warm) });
    view.apply(at(1, list(1, 2)), 0);
    view.apply(at(2, list(3, 1, 2)), 1);
    expect(view.get('p')!.advert.warm).toEqual(list(3, 1, 2));
    expect(view.get('p')!.advert.warmDelta).toBeUndefined();
    at(3, list(4, 3, 1, 2)); // lost on the way
    view.apply(at(4, list(5, 4, 3, 1, 2)), 2);
    expect(view.get('p')!.advert.warm).toEqual(list(3, 1, 2));
    // A stale (older seq) advert changes nothing, a whole list catches up.
    expect(view.apply(at(3, list(5, 4, 3, 1, 2)), 3)).toBe('stale');
    view.apply(AdvertSchema.parse({ ...advert('p'), seq: 5, ...enc.encode(list(6, 5), true) }), 4);
    expect(view.get('p')!.advert.warm).toEqual(list(6, 5));
  });

  it('a peer seen first through a delta has no warm list until a whole one arrives', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    view.apply(
      AdvertSchema.parse({
        ...advert('p'),
        warmRev: 3,
        warmDelta: { from: 2, front: list(1), drop: [], len: 1 },
      }),
      0,
    );
    expect(view.get('p')!.advert.warm).toEqual([]);
    expect(view.get('p')!.advert.warmRev).toBeUndefined();
  });
});
