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

  it('drops a disconnected peer after 3 missed intervals, never itself', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    view.apply(advert('me', 1), 0);
    view.apply(advert('p1', 1), 0);
    view.apply(advert('p2', 1), 2000);
    const down = () => false;
    expect(view.expire(3000, down)).toEqual([]);
    expect(view.expire(3001, down)).toEqual(['p1']);
    expect(view.expire(5001, down)).toEqual(['p2']);
    expect(view.expire(60_000, down)).toEqual([]);
    expect(view.nodes().map((n) => n.advert.peerId)).toEqual(['me']);
  });

  it('keeps a connected peer whose adverts come late, and drops it once the failure detector suspects it', () => {
    const view = createFleetView({ selfPeerId: 'me', intervalMs: 1000 });
    view.apply(advert('me', 1), 0);
    // Adverts every 1 to 3 s (a busy machine): the old rule (3 missed intervals) would flap at 3.5 s.
    const gaps = [1000, 3000, 1500, 2800, 1000, 2900, 1200, 3000];
    let t = 0;
    let seq = 1;
    view.apply(advert('p1', seq), t);
    for (const gap of gaps) {
      expect(view.expire(t + gap - 1)).toEqual([]);
      t += gap;
      view.apply(advert('p1', ++seq), t);
    }
    expect(view.expire(t + 3500)).toEqual([]);
    const after = view.liveness('p1')!.suspectAfterMs;
    expect(after).toBeGreaterThan(3500);
    expect(view.expire(t + after - 1)).toEqual([]);
    expect(view.expire(t + after)).toEqual(['p1']);
    // Dropped for silence, its history is kept: when it comes back its long gap widens its grace.
    expect(view.liveness('p1')).toBeDefined();
    expect(view.apply(advert('p1', ++seq), t + 30_000)).toBe('new');
    expect(view.liveness('p1')!.suspectAfterMs).toBeGreaterThan(after);
  });

  it('honours a custom number of missed intervals and detector settings', () => {
    const view = createFleetView({
      selfPeerId: 'me',
      intervalMs: 1000,
      missedIntervals: 1,
      detector: { maxSilenceMs: 2000 },
    });
    view.apply(advert('p1', 1), 0);
    view.apply(advert('p2', 1), 0);
    expect(view.expire(1001, (p) => p !== 'p1')).toEqual(['p1']);
    expect(view.expire(1999)).toEqual([]);
    expect(view.expire(2000)).toEqual(['p2']);
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
    expect(view.liveness('p2')).toBeUndefined();
    expect(view.liveness('p1')).toBeUndefined();
    expect(view.remove('me')).toBe(false);
    expect(view.size).toBe(1);
    // A stale leaving advert (older seq) does not remove a peer that came back.
    view.apply(advert('p3', 10), 0);
    expect(view.apply(advert('p3', 9, { leaving: true }), 0)).toBe('stale');
    expect(view.get('p3')).toBeDefined();
  });
});
