import { describe, expect, it } from 'vitest';
import { createFleetView } from '../../placement/fleet-view.ts';
import { advert } from './adverts.ts';

describe('fleet view', () => {
  it('keeps the newest advert per peer and ignores stale ones', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    expect(view.apply(advert('a', { seq: 2 }), 0)).toBe('new');
    expect(view.apply(advert('a', { seq: 2 }), 10)).toBe('stale');
    expect(view.apply(advert('a', { seq: 1 }), 10)).toBe('stale');
    expect(view.apply(advert('a', { seq: 3, load: { queued: 1, running: 2, capacity: 4 } }), 20)).toBe(
      'updated',
    );
    expect(view.get('a')?.advert.load.running).toBe(2);
    expect(view.get('a')?.receivedAt).toBe(20);
  });

  it('drops a leaving peer, a removed peer and silent peers, never itself', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000, missedIntervals: 2 });
    view.apply(advert('me'), 0);
    view.apply(advert('a'), 0);
    view.apply(advert('b'), 1500);
    view.apply(advert('c'), 0);
    expect(view.apply(advert('c', { seq: 2, leaving: true }), 100)).toBe('left');
    expect(view.expire(2000)).toEqual([]);
    expect(view.expire(2001)).toEqual(['a']);
    expect(view.remove('me')).toBe(false);
    expect(view.remove('b')).toBe(true);
    expect(view.expire(1e9)).toEqual([]);
    expect(view.nodes().map((n) => [n.advert.peerId, n.self])).toEqual([['me', true]]);
  });

  it('lists self first, then by host and peer id', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    view.apply(advert('z', { host: 'alpha' }), 0);
    view.apply(advert('y', { host: null }), 0);
    view.apply(advert('me', { host: 'zulu' }), 0);
    view.apply(advert('x', { host: 'alpha' }), 0);
    expect(view.nodes().map((n) => n.advert.peerId)).toEqual(['me', 'y', 'x', 'z']);
    expect(view.size).toBe(4);
  });
});
