import { describe, expect, it } from 'vitest';
import type { NodeOutstanding } from '../../placement/eligibility.ts';
import {
  createBackPressure,
  FULL_BACKOFF_MS,
  fleetFreeSlots,
  freeSlots,
  indexFleet,
  jobBounds,
  loadOf,
  type RoomContext,
  withRoom,
} from '../../placement/room.ts';
import { advert, fleetNode } from '../helpers/adverts.ts';

/** A node that keeps no job waiting for a slot (it does not report `waiting`, as before that was added). */
const node = (peerId: string, capacity: number, running = 0, generating = running, queued = 0) =>
  fleetNode(advert(peerId, { load: { queued, running, generating, capacity } }));
/** A node that reports `waiting`, and so keeps one job waiting for a slot. */
const queuing = (capacity: number, running = 0, generating = running, queued = 0, waiting = 0) =>
  fleetNode(advert('a', { load: { queued, running, generating, waiting, capacity } }));

function context(overrides: Partial<RoomContext> & { nodes?: ReturnType<typeof node>[] } = {}): RoomContext {
  const { nodes = [node('a', 4), node('b', 2), node('c', 1)], ...rest } = overrides;
  return {
    fleet: indexFleet(nodes),
    outstanding: new Map<string, NodeOutstanding>(),
    selfPeerId: 'self',
    proven: new Set(['a', 'b', 'c']),
    busyUntil: new Map(),
    now: 1000,
    ...rest,
  };
}

describe('room', () => {
  it('counts a proven node’s slots minus the larger of its own jobs and its advertised running jobs', () => {
    const ctx = context({
      nodes: [node('a', 4, 1), node('b', 4, 3), node('c', 4, 4)],
      outstanding: new Map([
        ['a', { jobs: 2, generating: 2, models: ['m'] }],
        ['b', { jobs: 1, generating: 1, models: ['m'] }],
        ['c', { jobs: 5, generating: 5, models: ['m'] }],
      ]),
    });
    expect(freeSlots('a', ctx)).toBe(2);
    expect(freeSlots('b', ctx)).toBe(1);
    // More jobs than slots (an advert that shrank): no room, never negative.
    expect(freeSlots('c', ctx)).toBe(0);
    expect(fleetFreeSlots(ctx)).toBe(3);
  });

  it('counts generation slots: a job past generation frees its slot, and each slot holds one such job besides (no waiting job on a node that does not report `waiting`)', () => {
    const own = (jobs: number, generating: number) => ({ jobs, generating, models: ['m'] });
    const at = (n: ReturnType<typeof node>, mine?: NodeOutstanding) =>
      freeSlots('a', context({ nodes: [n], outstanding: new Map(mine ? [['a', mine]] : []) }));
    // 2 slots: one job generating and one scoring leaves one slot; two scoring leave two.
    expect(at(node('a', 2), own(2, 1))).toBe(1);
    expect(at(node('a', 2), own(2, 0))).toBe(2);
    // At most 2 × slots jobs in all: 3 scoring leave one, 4 none, whatever is generating.
    expect(at(node('a', 2), own(3, 0))).toBe(1);
    expect(at(node('a', 2), own(4, 0))).toBe(0);
    expect(at(node('a', 2), own(3, 2))).toBe(0);
    // Other submitters' jobs, from the advert: generating ones hold slots, all count in the bound.
    expect(at(node('a', 2, 2, 0, 1))).toBe(1);
    expect(at(node('a', 2, 1, 1))).toBe(1);
    expect(at(node('a', 2, 1, 1), own(1, 0))).toBe(1);
    // The larger of the two counts, never their sum (the advert includes this submitter's jobs).
    expect(at(node('a', 2, 2, 1), own(2, 1))).toBe(1);
  });

  it('keeps one job waiting for a slot on a node that reports `waiting`, within the same bounds', () => {
    expect(jobBounds(2, true)).toEqual({ generation: 3, total: 5 });
    expect(jobBounds(2, false)).toEqual({ generation: 2, total: 4 });
    expect(jobBounds(0, true)).toEqual({ generation: 0, total: 0 });
    const own = (jobs: number, generating: number) => ({ jobs, generating, models: ['m'] });
    const at = (n: ReturnType<typeof node>, mine?: NodeOutstanding) =>
      freeSlots('a', context({ nodes: [n], outstanding: new Map(mine ? [['a', mine]] : []) }));
    // 2 slots + 1 waiting: this submitter's jobs not yet generated (generating or waiting) count against 3.
    expect(at(queuing(2), own(2, 2))).toBe(1);
    expect(at(queuing(2), own(3, 3))).toBe(0);
    expect(at(queuing(2), own(2, 1))).toBe(2);
    // At most 2 × slots + 1 jobs in all.
    expect(at(queuing(2), own(2, 0))).toBe(3);
    expect(at(queuing(2), own(4, 1))).toBe(1);
    expect(at(queuing(2), own(5, 0))).toBe(0);
    // Other submitters' jobs, from the advert: a waiting one is queued, and takes the waiting place.
    expect(at(queuing(2, 2, 2, 1, 1))).toBe(0);
    expect(at(queuing(2, 2, 2))).toBe(1);
    expect(at(queuing(2, 1, 1, 1, 1))).toBe(1);
    // The larger of the two counts, never their sum (the advert includes this submitter's jobs).
    expect(at(queuing(2, 2, 2, 1, 1), own(3, 3))).toBe(0);
    expect(at(queuing(2, 2, 1), own(2, 1))).toBe(2);
    // No slots (paused), no waiting job either.
    expect(at(queuing(0))).toBe(0);
  });

  it('takes the load a job message reported over the advert when it is as new or newer (the node’s clock)', () => {
    const n = fleetNode(
      advert('a', { sentAt: 5000, load: { queued: 0, running: 2, generating: 2, capacity: 2 } }),
    );
    const reported = (at: number) => ({ queued: 0, running: 1, generating: 1, capacity: 2, at });
    expect(loadOf(n, undefined)).toBe(n.advert.load);
    expect(loadOf(n, reported(4999))).toBe(n.advert.load);
    expect(loadOf(n, reported(5000))).toEqual(reported(5000));
    const ctx = (at: number) => context({ nodes: [n], reported: new Map([['a', reported(at)]]) });
    expect(freeSlots('a', ctx(4000))).toBe(0);
    expect(freeSlots('a', ctx(6000))).toBe(1);
  });

  it('counts every running job as generating on a node that does not advertise `generating`', () => {
    const older = fleetNode(advert('a', { load: { queued: 0, running: 2, capacity: 2 } }));
    expect(freeSlots('a', context({ nodes: [older] }))).toBe(0);
    const half = fleetNode(advert('a', { load: { queued: 1, running: 1, capacity: 2 } }));
    expect(freeSlots('a', context({ nodes: [half] }))).toBe(1);
  });

  it('gives a node on probation one job at most (generating or scoring), but never this node itself', () => {
    const ctx = context({ nodes: [node('a', 4)], proven: new Set() });
    const scoring = { ...ctx, outstanding: new Map([['a', { jobs: 1, generating: 0, models: ['m'] }]]) };
    expect(freeSlots('a', scoring)).toBe(0);
    const advertised = context({ nodes: [node('a', 4, 1, 0)], proven: new Set() });
    expect(freeSlots('a', advertised)).toBe(0);
  });

  it('gives a node on probation one slot at most, but never this node itself', () => {
    const ctx = context({ nodes: [node('a', 4), node('self', 4), node('z', 0)], proven: new Set() });
    expect(freeSlots('a', ctx)).toBe(1);
    expect(freeSlots('self', ctx)).toBe(4);
    expect(freeSlots('z', ctx)).toBe(0);
    const busy = { ...ctx, outstanding: new Map([['a', { jobs: 1, generating: 1, models: ['m'] }]]) };
    expect(freeSlots('a', busy)).toBe(0);
  });

  it('has no room on a node that is not in the fleet or said it is full, until the back-off ends', () => {
    const pressure = createBackPressure();
    pressure.full('a', 1000);
    expect(pressure.busyUntil.get('a')).toBe(1000 + FULL_BACKOFF_MS);
    const at = (now: number) => context({ busyUntil: pressure.busyUntil, now });
    expect(freeSlots('a', at(1000))).toBe(0);
    expect(freeSlots('a', at(1000 + FULL_BACKOFF_MS - 1))).toBe(0);
    expect(freeSlots('a', at(1000 + FULL_BACKOFF_MS))).toBe(4);
    expect(freeSlots('gone', at(5000))).toBe(0);
    expect(fleetFreeSlots(at(1000))).toBe(3);
    const short = createBackPressure(10);
    short.full('b', 0);
    expect(short.busyUntil.get('b')).toBe(10);
  });

  it('takes the placer’s choice if it has room, else the first in rendezvous order that has, else null', () => {
    const full = { jobs: 9, generating: 9, models: ['m'] };
    const ranked = [{ peerId: 'c' }, { peerId: 'b' }, { peerId: 'a' }];
    expect(withRoom({ peerId: 'a', ranked }, context())).toBe('a');
    const aFull = context({ outstanding: new Map([['a', full]]) });
    expect(withRoom({ peerId: 'a', ranked }, aFull)).toBe('c');
    const aCFull = context({
      outstanding: new Map([
        ['a', full],
        ['c', full],
      ]),
    });
    expect(withRoom({ peerId: 'a', ranked }, aCFull)).toBe('b');
    // A peer listed twice, or one outside the fleet, changes nothing.
    expect(withRoom({ peerId: 'a', ranked: [{ peerId: 'x' }, { peerId: 'c' }, ...ranked] }, aCFull)).toBe(
      'b',
    );
    const allFull = context({
      outstanding: new Map([
        ['a', full],
        ['b', full],
        ['c', full],
      ]),
    });
    expect(withRoom({ peerId: 'a', ranked }, allFull)).toBeNull();
    expect(withRoom({ peerId: 'a', ranked: [] }, aFull)).toBeNull();
  });
});
