import { describe, expect, it } from 'vitest';
import { createPublishPacer } from '../../node/fleet/pacer.ts';

describe('advert publish pacing', () => {
  it('publishes a change at once, then coalesces changes within coalesceMs into one publish when it is up', () => {
    const p = createPublishPacer({ intervalMs: 5000, coalesceMs: 250 });
    expect(p.changed(1000)).toBe(0);
    p.published(1000);
    expect(p.changed(1100)).toBe(150);
    expect(p.changed(1249)).toBe(1);
    expect(p.changed(1250)).toBe(0);
  });

  it('skips a heartbeat within half an interval of the last advert, so gaps stay under 1.5 intervals', () => {
    const p = createPublishPacer({ intervalMs: 5000 });
    expect(p.heartbeat(0)).toBe(true);
    p.published(0);
    p.published(3000);
    expect(p.heartbeat(5000)).toBe(false);
    expect(p.heartbeat(5500)).toBe(true);
    // Worst case: an advert just after half an interval, the next tick skips nothing.
    p.published(7501);
    expect(p.heartbeat(10_000)).toBe(false);
    expect(p.heartbeat(15_000)).toBe(true);
  });
});
