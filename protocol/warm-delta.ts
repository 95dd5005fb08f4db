import type { Advert, WarmDelta, WarmEntry } from './advert.ts';

/**
 * Warm lists sent as changes (the `warmDelta` of an advert). A node's warm list is an LRU, newest
 * first: a prompt used again moves to the front, a new one is inserted at the front, the oldest fall
 * off the end. So every change is "these entries go to the front, the rest keep their order, cut to
 * `len`", and a delta names only the front. Adverts carry it instead of the whole list (~110 bytes
 * per entry, up to 64), and the whole list now and then so a receiver that missed one recovers.
 */

/** A sender sends its whole list at least every this many adverts (and on its first). */
export const WARM_FULL_EVERY = 12;

const key = (e: WarmEntry) => `${e.model}\u0000${e.prompt}`;

/** The parts of a delta that change the list (the revision is the advert's business). */
export type WarmChange = Pick<WarmDelta, 'front' | 'drop' | 'len'>;

/** The list a delta makes of `old`: the front, then the old entries neither moved nor dropped, cut to `len`. */
export function applyWarmDelta(old: readonly WarmEntry[], delta: WarmChange): WarmEntry[] {
  const gone = new Set([...delta.front, ...delta.drop].map(key));
  const rest = old.filter((e) => !gone.has(key(e)));
  return [...delta.front, ...rest].slice(0, delta.len);
}

/**
 * A small delta from `old` to `next`: the shortest front such that the rest of `next` is the old
 * order with some entries dropped; the dropped ones are named only up to where `next` ends (the cut
 * removes the others). Null when `next` repeats an entry (never an LRU's list): then the whole list is sent.
 */
export function diffWarm(old: readonly WarmEntry[], next: readonly WarmEntry[]): WarmChange | null {
  if (new Set(next.map(key)).size !== next.length) return null;
  for (let p = 0; p <= next.length; p++) {
    const change = dropsFor(old, next, p);
    if (change) return change;
  }
  return null;
}

/** The delta with front `next[0..p)`, when the rest of `next` is an in-order subsequence of the rest of `old`. */
function dropsFor(old: readonly WarmEntry[], next: readonly WarmEntry[], p: number): WarmChange | null {
  const front = next.slice(0, p);
  const moved = new Set(front.map(key));
  const rest = old.filter((e) => !moved.has(key(e)));
  const drop: WarmEntry[] = [];
  let j = p;
  for (const e of rest) {
    if (j === next.length) break;
    if (key(e) === key(next[j]!)) j += 1;
    else drop.push(e);
  }
  if (j < next.length) return null;
  const change = { front, drop, len: next.length };
  return sameList(applyWarmDelta(old, change), next) ? change : null;
}

function sameList(a: readonly WarmEntry[], b: readonly WarmEntry[]): boolean {
  return a.length === b.length && a.every((e, i) => key(e) === key(b[i]!));
}

/** What an advert carries of its sender's warm list: the whole list, or a delta to an earlier revision. */
export type WarmFields = Pick<Advert, 'warm' | 'warmRev' | 'warmDelta'>;

export interface WarmEncoder {
  /** The warm fields of the next advert for the sender's list now (`whole` forces the whole list). */
  encode(list: readonly WarmEntry[], whole?: boolean): WarmFields;
}

/**
 * The sender's side: numbers the revisions of its list and sends the whole list on the first advert,
 * every `fullEvery`-th one and when a delta would be as long; a delta to the previous advert otherwise.
 */
export function createWarmEncoder(fullEvery = WARM_FULL_EVERY): WarmEncoder {
  let last: readonly WarmEntry[] | null = null;
  let rev = 0;
  let sinceWhole = 0;
  return {
    encode(list, whole = false) {
      const previous = rev;
      if (last && !sameList(last, list)) rev += 1;
      const delta = last && !whole && sinceWhole + 1 < fullEvery ? diffWarm(last, list) : null;
      last = [...list];
      if (!delta || (delta.front.length + delta.drop.length >= list.length && list.length > 0)) {
        sinceWhole = 0;
        return { warm: [...list], warmRev: rev };
      }
      sinceWhole += 1;
      return { warm: [], warmRev: rev, warmDelta: { from: previous, ...delta } };
    },
  };
}

/**
 * The receiver's side: the advert with its whole warm list, given the sender's advert held before.
 * A delta to the held revision is applied; a delta to another (an advert was missed) keeps the held
 * list at its own revision, so no later delta applies to it until the next whole list: a receiver's
 * list is always one the sender had, never a mix.
 */
export function resolveWarm<A extends Advert>(advert: A, held: Advert | undefined): A {
  const { warmDelta, ...rest } = advert;
  if (!warmDelta) return advert;
  if (held && held.warmRev === warmDelta.from && !held.warmDelta)
    return { ...rest, warm: applyWarmDelta(held.warm, warmDelta) } as A;
  const { warmRev: _dropped, ...unrevised } = rest;
  return (
    held?.warmRev === undefined
      ? { ...unrevised, warm: [] }
      : { ...unrevised, warm: held.warm, warmRev: held.warmRev }
  ) as A;
}
