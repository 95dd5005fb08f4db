import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AuditTrail } from './trail.ts';

// Deliberately timer-based (fake timers): the miner flags this test file as possibly flaky.
describe('AuditTrail', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-01-01T00:00:00Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('stamps events with the current time by default', () => {
    const trail = new AuditTrail();
    const e = trail.record('ana', 'post #1');
    expect(e.at).toBe(Date.parse('2026-01-01T00:00:00Z'));
    expect(Object.isFrozen(e)).toBe(true);
  });

  it('returns only recent events', () => {
    const trail = new AuditTrail();
    trail.record('ana', 'post #1');
    vi.advanceTimersByTime(60_000);
    trail.record('bo', 'reverse #1');
    vi.advanceTimersByTime(1_000);
    expect(trail.recent(30_000).map((e) => e.action)).toEqual(['reverse #1']);
    expect(trail.recent(120_000)).toHaveLength(2);
  });

  it('drops the oldest events beyond capacity and filters by actor', () => {
    let t = 0;
    const trail = new AuditTrail({ now: () => ++t, capacity: 2 });
    trail.record('ana', 'a');
    trail.record('bo', 'b');
    trail.record('ana', 'c');
    expect(trail.size).toBe(2);
    expect(trail.by('ana').map((e) => [e.action, e.at])).toEqual([['c', 3]]);
  });
});
