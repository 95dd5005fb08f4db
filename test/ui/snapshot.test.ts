import { describe, expect, it } from 'vitest';
import type { CollectorStats } from '../../node/collector/collector.ts';
import type { FleetStatus, NodeStatus } from '../../node/status.ts';
import type { CampaignStatus } from '../../node/submitter/service.ts';
import {
  buildSnapshot,
  changed,
  datasetFigures,
  etaMs,
  growthOf,
  MAX_GROWTH_POINTS,
  rewardHistogram,
  uiCampaign,
  uiDataset,
  uiNodes,
} from '../../node/ui/snapshot.ts';
import { checkSnapshot, parseSnapshot, REWARD_BINS } from '../../node/ui/snapshot-schema.ts';
import { duration, gib, percent, rate } from '../../node/ui/web/format.ts';

const peer = (c: string) => `12D3KooW${c.repeat(44)}`;

function node(id: string, over: Partial<NodeStatus> = {}): NodeStatus {
  return {
    peerId: id,
    shortId: id.slice(-8),
    self: false,
    host: 'studio',
    addrs: [],
    version: '0.1.0',
    roles: ['worker', 'submitter'],
    models: [{ id: 'coder', server: 'llama-server', context: 8192, concurrency: 4, loaded: true }],
    memory: { total: 64 * 2 ** 30, free: 20 * 2 ** 30, reserved: 0 },
    load: { queued: 1, running: 2, capacity: 4 },
    warm: 3,
    workspaces: ['ws'],
    sandbox: { backend: 'bwrap', ok: true },
    seq: 1,
    sentAt: 0,
    lastSeenMs: 500,
    ...over,
  } as NodeStatus;
}

const fleet = (nodes: NodeStatus[]): FleetStatus => ({ fleet: 'f', self: nodes[0]!.peerId, nodes });

const stats = { completionTokens: 0, promptTokens: 0, tokensPerSecond: null, cacheHitRate: null };

function campaign(
  over: Partial<CampaignStatus> & { scored?: number; planned?: number } = {},
): CampaignStatus {
  const { scored = 4, planned = 10, ...rest } = over;
  return {
    name: 'c1',
    seedBase: 7,
    status: 'running',
    summary: {
      samples: { planned, placed: 2, generated: scored + 1, scored, verified: scored - 1 },
      preexisting: 0,
      ...stats,
      completionTokens: 5000,
      cacheHitRate: 0.5,
      tasks: [],
      nodes: [
        { peerId: peer('a'), generated: 3, scored: 3, verified: 2, ...stats },
        { peerId: peer('b'), generated: 2, scored: 1, verified: 1, ...stats },
      ],
      models: [],
    },
    running: [
      { jobId: 'j1', taskId: 't', peerId: peer('b'), samples: 2 },
      { jobId: 'j2', taskId: 't2', peerId: peer('c'), samples: 3 },
      { jobId: 'j3', taskId: 't3', peerId: peer('c'), samples: 1 },
    ],
    problem: null,
    outcome: null,
    startedAt: 1_000_000,
    finishedAt: 0,
    ...rest,
  };
}

const collectorStats: CollectorStats = {
  digests: 5,
  samples: 4,
  audited: 1,
  bodies: 4,
  pending: 1,
  rejected: 0,
  audits: 1,
  auditFailures: 0,
  fetchErrors: 0,
  taskRowsRejected: 0,
  taskRowsMissing: 0,
  lagP50Ms: 120,
  lagP99Ms: 900,
};

describe('fleet nodes', () => {
  it('puts this node first, then orders by peer id, with trust from the collector', () => {
    const nodes = uiNodes(fleet([node(peer('c')), node(peer('b')), node(peer('a'), { self: true })]), [
      { origin: peer('b'), trust: 0.25 } as never,
    ]);
    expect(nodes.map((n) => n.peerId)).toEqual([peer('a'), peer('b'), peer('c')]);
    expect(nodes[0]!.self).toBe(true);
    expect(nodes.map((n) => n.trust)).toEqual([null, 0.25, null]);
    expect(nodes[1]).toMatchObject({
      memory: { total: 64 * 2 ** 30, free: 20 * 2 ** 30 },
      load: { queued: 1, running: 2, capacity: 4 },
      warm: 3,
      models: [{ id: 'coder', loaded: true, concurrency: 4 }],
      sandbox: { backend: 'bwrap', ok: true },
    });
  });
});

describe('campaigns', () => {
  it('progress, tokens/s over wall time, cache hits, and running samples per node', () => {
    const c = uiCampaign(campaign(), 1_000_000 + 10_000);
    expect(c).toMatchObject({ scored: 4, planned: 10, verified: 3, progress: 0.4, cacheHitRate: 0.5 });
    expect(c.tokensPerSecond).toBe(500);
    expect(c.nodes).toEqual([
      { peerId: peer('a'), shortId: peer('a').slice(-8), generated: 3, scored: 3, verified: 2, running: 0 },
      { peerId: peer('b'), shortId: peer('b').slice(-8), generated: 2, scored: 1, verified: 1, running: 2 },
      { peerId: peer('c'), shortId: peer('c').slice(-8), generated: 0, scored: 0, verified: 0, running: 4 },
    ]);
  });

  it('ETA from the scoring rate: unknown before a sample, 0 when complete, null when not running', () => {
    const now = 1_000_000 + 10_000;
    expect(etaMs({ status: 'running', planned: 10, scored: 4, startedAt: 1_000_000 }, now)).toBe(15_000);
    expect(etaMs({ status: 'running', planned: 10, scored: 0, startedAt: 1_000_000 }, now)).toBeNull();
    expect(etaMs({ status: 'running', planned: 10, scored: 10, startedAt: 1_000_000 }, now)).toBe(0);
    expect(etaMs({ status: 'stalled', planned: 10, scored: 4, startedAt: 1_000_000 }, now)).toBeNull();
    // A campaign this daemon does not run (stored, startedAt 0) has no rate.
    expect(etaMs({ status: 'running', planned: 10, scored: 4, startedAt: 0 }, now)).toBeNull();
    // A clock that went backwards gives no negative ETA.
    expect(etaMs({ status: 'running', planned: 10, scored: 4, startedAt: now + 5 }, now)).toBeNull();
  });

  it('an empty plan is 0% done, not NaN; no tokens give no rate', () => {
    const c = uiCampaign(
      campaign({
        planned: 0,
        scored: 0,
        summary: {
          ...campaign().summary,
          samples: { planned: 0, placed: 0, generated: 0, scored: 0, verified: 0 },
          completionTokens: 0,
        },
      }),
      2_000_000,
    );
    expect(c.progress).toBe(0);
    expect(c.tokensPerSecond).toBeNull();
  });
});

describe('dataset figures', () => {
  it('reward histogram: ten bins of 0.1 and reward 1 apart; out-of-range values clamp, NaN is skipped', () => {
    const bins = rewardHistogram([0, 0.05, 0.1, 0.55, 0.99, 0.999, 1, 1, -0.2, 1.5, Number.NaN]);
    expect(bins).toHaveLength(REWARD_BINS + 1);
    expect(bins).toEqual([3, 1, 0, 0, 0, 1, 0, 0, 0, 2, 3]);
  });

  it('growth is cumulative, ends at the total, and stays within its bound', () => {
    expect(growthOf([])).toEqual([]);
    expect(growthOf([5, 5, 5])).toEqual([{ at: 5, samples: 3 }]);
    expect(growthOf([30, 10, 20], 3)).toEqual([
      { at: 10, samples: 1 },
      { at: 20, samples: 2 },
      { at: 30, samples: 3 },
    ]);
    const many = Array.from({ length: 10_000 }, (_, i) => i * 7);
    const g = growthOf(many);
    expect(g.length).toBeLessThanOrEqual(MAX_GROWTH_POINTS);
    expect(g.at(-1)).toEqual({ at: 9_999 * 7, samples: 10_000 });
    for (let i = 1; i < g.length; i++) {
      expect(g[i]!.at).toBeGreaterThan(g[i - 1]!.at);
      expect(g[i]!.samples).toBeGreaterThan(g[i - 1]!.samples);
    }
  });

  it('counts a sample id once in the histogram, however many origins claim it', () => {
    const s = (id: string, reward: number, scoredAt: number | null) => ({
      digest: { sampleId: id, reward },
      body: scoredAt === null ? null : { scoredAt },
    });
    const f = datasetFigures([s('x', 1, 10), s('x', 1, 11), s('y', 0, null)], []);
    expect(f.rewards[REWARD_BINS]).toBe(1);
    expect(f.rewards[0]).toBe(1);
    expect(f.growth.at(-1)!.samples).toBe(2);
  });
});

describe('the snapshot', () => {
  const full = () =>
    buildSnapshot({
      status: fleet([node(peer('a'), { self: true }), node(peer('b'))]),
      campaigns: [campaign()],
      dataset: uiDataset('/d', collectorStats, {
        growth: [{ at: 1, samples: 4 }],
        rewards: rewardHistogram([1, 0.5]),
        models: [{ model: 'coder', tasks: 2, samples: 4, pass1: 0.75, passk: 1, k: 2 }],
      }),
      now: 1_010_000,
    });

  it('passes its schema, and survives JSON both ways', () => {
    const s = full();
    expect(checkSnapshot(s, 'x')).toEqual(s);
    expect(parseSnapshot(JSON.stringify(s), 'x')).toEqual(s);
  });

  it('bad input names the input and the field', () => {
    expect(() => parseSnapshot('{', 'the snapshot event')).toThrow(/^the snapshot event: \(root\): not JSON/);
    const s = full();
    const bad = (mutate: (x: Record<string, unknown>) => void) => {
      const x = JSON.parse(JSON.stringify(s)) as Record<string, unknown>;
      mutate(x);
      return () => checkSnapshot(x, '/api/state');
    };
    expect(bad((x) => (x.v = 2))).toThrow(/^\/api\/state: v: /);
    expect(bad((x) => ((x.nodes as { load: { queued: number } }[])[1]!.load.queued = -1))).toThrow(
      /^\/api\/state: nodes\.1\.load\.queued: /,
    );
    expect(bad((x) => ((x.campaigns as { progress: number }[])[0]!.progress = 1.5))).toThrow(
      /campaigns\.0\.progress/,
    );
    expect(bad((x) => ((x.campaigns as { status: string }[])[0]!.status = 'paused'))).toThrow(
      /campaigns\.0\.status/,
    );
    expect(bad((x) => ((x.dataset as { rewards: number[] }).rewards = [1, 2]))).toThrow(/dataset\.rewards/);
    expect(bad((x) => delete x.fleet)).toThrow(/fleet/);
  });

  it('a change is anything but the build time and advert ages', () => {
    const a = full();
    expect(changed(null, a)).toBe(true);
    const later = {
      ...a,
      at: a.at + 999,
      nodes: a.nodes.map((n) => ({ ...n, lastSeenMs: n.lastSeenMs + 700 })),
    };
    expect(changed(a, later)).toBe(false);
    const moved = { ...a, campaigns: [{ ...a.campaigns[0]!, scored: 5 }] };
    expect(changed(a, moved)).toBe(true);
    const loaded = {
      ...a,
      nodes: [{ ...a.nodes[0]!, load: { queued: 0, running: 0, capacity: 4 } }, a.nodes[1]!],
    };
    expect(changed(a, loaded)).toBe(true);
  });
});

describe('page formatting', () => {
  it('formats bytes, shares, durations and rates', () => {
    expect(gib(1.5 * 2 ** 30)).toBe('1.5 GiB');
    expect(percent(null)).toBe('–');
    expect(percent(0.456)).toBe('46%');
    expect(duration(null)).toBe('–');
    expect(duration(12_400)).toBe('12s');
    expect(duration(185_000)).toBe('3m 05s');
    expect(duration(3_720_000)).toBe('1h 02m');
    expect(rate(null)).toBe('–');
    expect(rate(12.34)).toBe('12.3');
    expect(rate(1234.5)).toBe('1235');
  });
});
