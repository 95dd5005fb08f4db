import { describe, expect, it } from 'vitest';
import { createPlacer } from '../../placement/placer.ts';
import { createThroughput } from '../../placement/throughput.ts';
import { advert, fleetNode, MODEL, model, task } from '../helpers/adverts.ts';

const warm = (completionTokens: number, latencyMs: number) => ({
  promptTokens: 12_000,
  cachedTokens: 12_000,
  completionTokens,
  latencyMs,
});
const cold = (completionTokens: number, latencyMs: number) => ({
  promptTokens: 12_000,
  cachedTokens: 0,
  completionTokens,
  latencyMs,
});

describe('throughput', () => {
  it('rejects bad options and bad samples', () => {
    expect(() => createThroughput({ smoothing: 0 })).toThrow(/smoothing/);
    expect(() => createThroughput({ smoothing: 1.1 })).toThrow(/smoothing/);
    expect(() => createThroughput({ warmShare: -0.1 })).toThrow(/warmShare/);
    const t = createThroughput();
    expect(() => t.record('a', MODEL, warm(-1, 10))).toThrow(/completionTokens/);
    expect(() => t.record('a', MODEL, warm(10, Number.NaN))).toThrow(/latencyMs/);
  });

  it('ignores samples with no tokens or no time', () => {
    const t = createThroughput();
    t.record('a', MODEL, warm(0, 1000));
    t.record('a', MODEL, warm(100, 0));
    expect(t.rate('a', MODEL)).toBeNull();
  });

  it('averages warm samples and prefers them over cold ones', () => {
    const t = createThroughput({ smoothing: 0.5 });
    t.record('a', MODEL, cold(100, 10_000));
    expect(t.rate('a', MODEL)).toBe(10);
    t.record('a', MODEL, warm(400, 10_000));
    expect(t.rate('a', MODEL)).toBe(40);
    t.record('a', MODEL, warm(200, 10_000));
    expect(t.rate('a', MODEL)).toBe(30);
    t.record('a', MODEL, cold(10, 10_000));
    expect(t.rate('a', MODEL)).toBe(30);
    expect(t.rate('a', 'other')).toBeNull();
    t.forget('a');
    expect(t.rate('a', MODEL)).toBeNull();
  });

  it('weighs a node by capacity × rate, and an unmeasured one by the median rate', () => {
    const t = createThroughput();
    const slow = fleetNode(advert('slow', { load: { queued: 0, running: 0, capacity: 1 } }));
    const fast = fleetNode(advert('fast', { load: { queued: 0, running: 0, capacity: 4 } }));
    const fresh = fleetNode(advert('fresh', { load: { queued: 0, running: 0, capacity: 2 } }));
    // Nothing measured: capacity alone.
    expect(t.weight(fast, model())).toBe(4);
    t.record('slow', MODEL, warm(100, 10_000)); // 10 tok/s
    t.record('fast', MODEL, warm(600, 10_000)); // 60 tok/s
    expect(t.weight(slow, model())).toBe(10);
    expect(t.weight(fast, model())).toBe(240);
    expect(t.weight(fresh, model())).toBe(2 * 35);
    // Another model with no measurement borrows the fleet-wide median.
    expect(t.weight(fresh, model({ id: 'other' }))).toBe(2 * 35);
  });

  it('plugs into the placer: a measured fast node owns most prompts', () => {
    const t = createThroughput();
    const nodes = [fleetNode(advert('slow')), fleetNode(advert('fast'))];
    t.record('slow', MODEL, warm(100, 10_000));
    t.record('fast', MODEL, warm(900, 10_000));
    const placer = createPlacer({ weight: t.weight });
    let fast = 0;
    for (let i = 0; i < 1000; i++) {
      const p = placer.place({ task: task(`t${i}`), model: MODEL }, nodes, 0);
      if (p.ok && p.peerId === 'fast') fast++;
    }
    expect(Math.abs(fast / 1000 - 0.9)).toBeLessThan(0.03);
  });
});

describe('throughput median cache', () => {
  const unmeasured = fleetNode(advert('u'));
  it('follows every new measurement and forgotten node (the median is cached per model)', () => {
    const t = createThroughput({ smoothing: 1 });
    const other = model({ id: 'other' });
    expect(t.weight(unmeasured, model())).toBe(2);
    t.record('a', MODEL, warm(100, 10_000));
    expect(t.weight(unmeasured, model())).toBe(20);
    t.record('b', MODEL, warm(300, 10_000));
    expect(t.weight(unmeasured, model())).toBe(40);
    t.record('c', MODEL, warm(500, 10_000));
    expect(t.weight(unmeasured, model())).toBe(60);
    // Another model has no measurements: the median over all models, cached apart.
    expect(t.weight(unmeasured, other)).toBe(60);
    t.record('c', 'other', warm(1000, 10_000));
    expect(t.weight(unmeasured, other)).toBe(200);
    expect(t.weight(unmeasured, model())).toBe(60);
    t.forget('c');
    expect(t.weight(unmeasured, model())).toBe(40);
    expect(t.weight(unmeasured, other)).toBe(40);
    // A sample ignored (no tokens) changes nothing.
    t.record('a', MODEL, warm(0, 10_000));
    expect(t.weight(unmeasured, model())).toBe(40);
    t.forget('nobody');
    expect(t.weight(unmeasured, model())).toBe(40);
  });
});
