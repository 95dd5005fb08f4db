import { register } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  countedValidator,
  createMetrics,
  MAX_ORIGIN_LABELS,
  metrics,
  verdictOf,
} from '../../node/metrics.ts';

describe('metrics', () => {
  it('live on a registry of their own, never prom-client global one', async () => {
    const m = createMetrics();
    m.generated.inc({ model: 'coder' });
    expect(await m.registry.metrics()).toMatch(/vtnode_samples_generated_total\{model="coder"\} 1/);
    expect(await m.registry.metrics()).toContain('vtnode_process_resident_memory_bytes');
    expect(await register.metrics()).not.toContain('vtnode_');
    // The process's metrics are one instance.
    expect(metrics()).toBe(metrics());
  });

  it('verdicts are three labels', () => {
    expect([1, 1.2, 0.99, 0.01, 0, -1].map(verdictOf)).toEqual([
      'pass',
      'pass',
      'partial',
      'partial',
      'fail',
      'fail',
    ]);
  });

  it('queue depth reads the executor at each scrape', async () => {
    const m = createMetrics({ processMetrics: false });
    let load = { queued: 3, running: 1 };
    m.setLoadSource(() => load);
    expect(await m.registry.metrics()).toMatch(/vtnode_queue_depth\{state="queued"\} 3/);
    load = { queued: 0, running: 2 };
    const text = await m.registry.metrics();
    expect(text).toMatch(/vtnode_queue_depth\{state="queued"\} 0/);
    expect(text).toMatch(/vtnode_queue_depth\{state="running"\} 2/);
    m.setLoadSource(null);
    expect(await m.registry.metrics()).toMatch(/vtnode_queue_depth\{state="running"\} 0/);
  });

  it('origin labels are short ids, bounded: origins beyond the cap share `other`', () => {
    const m = createMetrics({ processMetrics: false });
    const labels = new Set<string>();
    for (let i = 0; i < MAX_ORIGIN_LABELS + 50; i++)
      labels.add(m.originLabel(`12D3KooW${String(i).padStart(44, '0')}`));
    expect(labels.size).toBe(MAX_ORIGIN_LABELS + 1);
    expect(labels.has('other')).toBe(true);
    // An origin labelled before the cap keeps its label.
    expect(m.originLabel(`12D3KooW${'0'.repeat(44)}`)).toBe('00000000');
  });

  it('a counted validator counts each verdict by topic and passes it through', async () => {
    const counted = async (direction: string) =>
      (await metrics().gossip.get()).values.find(
        (v) => v.labels.topic === 'digest' && v.labels.direction === direction,
      )?.value ?? 0;
    const counts = {
      in: await counted('in'),
      rejected: await counted('rejected'),
      ignored: await counted('ignored'),
    };
    const verdicts = ['accept', 'reject', 'ignore', 'accept'] as const;
    let i = 0;
    const v = countedValidator('digest', async () => verdicts[i++]!);
    expect([await v(), await v(), await v(), await v()]).toEqual([...verdicts]);
    expect(await counted('in')).toBe(counts.in + 2);
    expect(await counted('rejected')).toBe(counts.rejected + 1);
    expect(await counted('ignored')).toBe(counts.ignored + 1);
  });
});
