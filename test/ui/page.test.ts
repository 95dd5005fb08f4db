// The page alone in Chromium, against the real server and bundle with a fixed snapshot: quicker than
// the fleet test (test/ui/web-view.test.ts), for what the page renders from a snapshot.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext } from '@playwright/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../node/metrics.ts';
import { startUiServer, type UiServer } from '../../node/ui/server.ts';
import type { Snapshot } from '../../node/ui/snapshot-schema.ts';
import { launchChromium } from '../helpers/chromium.ts';

const peer = (c: string) => `12D3KooW${c.repeat(44)}`;
const state: { snapshot: Snapshot } = {
  snapshot: {
    v: 1,
    at: Date.now(),
    fleet: 'studio-fleet',
    self: peer('a'),
    nodes: ['a', 'b'].map((c, i) => ({
      peerId: peer(c),
      shortId: peer(c).slice(-8),
      self: i === 0,
      host: i === 0 ? 'studio-1' : null,
      roles: ['worker'],
      models: [{ id: 'coder', loaded: i === 0, concurrency: 4 }],
      memory: { total: 2 ** 36, free: 2 ** 35 },
      load: { queued: 1, running: 2, capacity: 4 },
      warm: 5,
      sandbox: { backend: 'bwrap', ok: i === 0 },
      trust: i === 0 ? null : 0.5,
      lastSeenMs: 1200,
    })),
    campaigns: [],
    dataset: {
      dir: '/d',
      digests: 3,
      samples: 3,
      bodies: 3,
      pending: 0,
      rejected: 0,
      audits: 1,
      auditFailures: 0,
      lagP50Ms: 100,
      lagP99Ms: 2000,
      growth: [
        { at: 1000, samples: 1 },
        { at: 2000, samples: 3 },
      ],
      rewards: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
      models: [{ model: 'coder', tasks: 2, samples: 3, pass1: 0.5, passk: 1, k: 2 }],
    },
  },
};

let server: UiServer;
let context: BrowserContext;
let profile: string;

beforeAll(async () => {
  server = await startUiServer({
    port: 0,
    snapshot: () => ({ ...state.snapshot, at: Date.now() }),
    registry: createMetrics({ processMetrics: false }).registry,
    intervalMs: 100,
  });
  profile = await mkdtemp(join(tmpdir(), 'vt-chromium-'));
  context = await launchChromium(profile);
}, 60_000);

afterAll(async () => {
  await context?.close();
  await server?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
});

describe('the page', () => {
  it('renders a snapshot in place of its placeholder, and follows the next one', async () => {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(server.url);
    await page.getByTestId('node').first().waitFor({ timeout: 20_000 });
    expect(await page.locator('#app').textContent()).not.toContain('Loading');
    const rows = await page.$$eval('[data-testid="node"]', (r) => r.map((x) => x.textContent ?? ''));
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain(`${peer('a').slice(-8)} (this node)`);
    expect(rows[0]).toContain('32.0 GiB / 64.0 GiB');
    expect(rows[0]).toContain('1+2/4');
    expect(rows[1]).toContain('coder (not loaded)');
    expect(rows[1]).toContain('0.50');
    await expect(page.getByText('No campaign submitted from this node yet').isVisible()).resolves.toBe(true);
    const dataset = (await page.getByTestId('dataset').textContent()) ?? '';
    expect(dataset).toContain('3 samples');
    expect(dataset).toMatch(/50%100% k=2/);
    expect(await page.locator('[data-testid="dataset"] rect').count()).toBe(11);

    // A campaign appears live.
    state.snapshot = {
      ...state.snapshot,
      campaigns: [
        {
          name: 'live-one',
          status: 'running',
          planned: 8,
          placed: 2,
          generated: 3,
          scored: 2,
          verified: 1,
          progress: 0.25,
          tokensPerSecond: 42.5,
          cacheHitRate: 0.75,
          etaMs: 65_000,
          startedAt: 1,
          problem: null,
          nodes: [
            {
              peerId: peer('b'),
              shortId: peer('b').slice(-8),
              generated: 3,
              scored: 2,
              verified: 1,
              running: 2,
            },
          ],
        },
      ],
    };
    await page.getByTestId('campaign').waitFor({ timeout: 10_000 });
    const campaign = (await page.getByTestId('campaign').textContent()) ?? '';
    expect(campaign).toContain('2 / 8 scored');
    expect(campaign).toContain('42.5 tokens/s');
    expect(campaign).toContain('75% cache hits');
    expect(campaign).toContain('ETA 1m 05s');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);
});
