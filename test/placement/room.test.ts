import { describe, expect, it } from 'vitest';
import type { NodeOutstanding } from '../../placement/eligibility.ts';
import {
  createBackPressure,
  FULL_BACKOFF_MS,
  fleetFreeSlots,
  freeSlots,
  indexFleet,
  type RoomContext,
  withRoom,
} from '../../placement/room.ts';
import { advert, fleetNode } from '../helpers/adverts.ts';

const node = (peerId: string, capacity: number, running = 0) =>
  fleetNode(advert(peerId, { load: { queued: 0, running, capacity } }));

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
        ['a', { jobs: 2, models: ['m'] }],
        ['b', { jobs: 1, models: ['m'] }],
        ['c', { jobs: 5, models: ['m'] }],
      ]),
    });
    expect(freeSlots('a', ctx)).toBe(2);
    expect(freeSlots('b', ctx)).toBe(1);
    // More jobs than slots (an advert that shrank): no room, never negative.
    expect(freeSlots('c', ctx)).toBe(0);
    expect(fleetFreeSlots(ctx)).toBe(3);
  });

  it('gives a node on probation one slot at most, but never this node itself', () => {
    const ctx = context({ nodes: [node('a', 4), node('self', 4), node('z', 0)], proven: new Set() });
    expect(freeSlots('a', ctx)).toBe(1);
    expect(freeSlots('self', ctx)).toBe(4);
    expect(freeSlots('z', ctx)).toBe(0);
    const busy = { ...ctx, outstanding: new Map([['a', { jobs: 1, models: ['m'] }]]) };
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
    const full = { jobs: 9, models: ['m'] };
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
