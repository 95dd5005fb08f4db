import { describe, expect, it } from 'vitest';
import { createFleetView } from '../../placement/fleet-view.ts';
import type { Advert } from '../../protocol/advert.ts';
import { sampleAdvert } from '../helpers/adverts.ts';

const advert = (peerId: string, seq: number, extra: Partial<Advert> = {}): Advert => ({
  ...sampleAdvert,
  peerId,
  seq,
  ...extra,
});

describe('fleet view', () => {
  it('keeps the newest advert per peer and ignores older or equal sequence numbers', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    expect(view.apply(advert('p1', 5), 0)).toBe('new');
    expect(view.apply(advert('p1', 5, { host: 'dup' }), 10)).toBe('stale');
    expect(view.apply(advert('p1', 3, { host: 'old' }), 20)).toBe('stale');
    expect(view.get('p1')!.advert.host).toBe(sampleAdvert.host);
    expect(view.get('p1')!.receivedAt).toBe(0);
    expect(view.apply(advert('p1', 6, { host: 'new' }), 30)).toBe('updated');
    expect(view.get('p1')!.advert.host).toBe('new');
    expect(view.get('p1')!.receivedAt).toBe(30);
  });

  it('orders self first, then by host, then by peer id', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    view.apply(advert('zz', 1, { host: 'b' }), 0);
    view.apply(advert('aa', 1, { host: 'b' }), 0);
    view.apply(advert('mm', 1, { host: 'a' }), 0);
    view.apply(advert('hidden', 1, { host: null }), 0);
    view.apply(advert('me', 1, { host: 'z' }), 0);
    expect(view.nodes().map((n) => n.advert.peerId)).toEqual(['me', 'hidden', 'mm', 'aa', 'zz']);
    expect(view.nodes()[0]!.self).toBe(true);
    expect(view.size).toBe(5);
  });

  it('drops a peer after 3 missed intervals, never itself', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    view.apply(advert('me', 1), 0);
    view.apply(advert('p1', 1), 0);
    view.apply(advert('p2', 1), 2000);
    expect(view.expire(3000)).toEqual([]);
    expect(view.expire(3001)).toEqual(['p1']);
    expect(view.expire(5001)).toEqual(['p2']);
    expect(view.expire(60_000)).toEqual([]);
    expect(view.nodes().map((n) => n.advert.peerId)).toEqual(['me']);
  });

  it('honours a custom number of missed intervals', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000, missedIntervals: 1 });
    view.apply(advert('p1', 1), 0);
    expect(view.expire(1001)).toEqual(['p1']);
  });

  it('removes a peer on a leaving advert or a disconnect, but not itself', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    view.apply(advert('me', 1), 0);
    view.apply(advert('p1', 1), 0);
    view.apply(advert('p2', 1), 0);
    expect(view.apply(advert('p1', 2, { leaving: true }), 10)).toBe('left');
    expect(view.get('p1')).toBeUndefined();
    expect(view.remove('p2')).toBe(true);
    expect(view.remove('p2')).toBe(false);
    expect(view.remove('me')).toBe(false);
    expect(view.size).toBe(1);
    // A stale leaving advert (older seq) does not remove a peer that came back.
    view.apply(advert('p3', 10), 0);
    expect(view.apply(advert('p3', 9, { leaving: true }), 0)).toBe('stale');
    expect(view.get('p3')).toBeDefined();
  });
});
