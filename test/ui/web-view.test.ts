// The web view end to end: a fleet of real nodes (separate processes, libp2p over loopback TCP, the
// real sandbox), a collector serving the page with --ui, and Debian's Chromium driven by Playwright.
// The page must show the fleet's nodes, then a campaign's progress advancing live, then the dataset.
// VTNODE_SCREENSHOT=1 also writes docs/web-view.png (committed; regenerate it the same way).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Page } from '@playwright/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../protocol/task.ts';
import { mineLedger, runCampaign, startFleet, type TestFleet, writeTasks } from '../helpers/campaign.ts';
import { CHROMIUM, launchChromium } from '../helpers/chromium.ts';
import { eventually, type Proc, REPO, Sandbox, vtnode } from '../helpers/cli.ts';
import { INTERVAL, peerIdOf, waitForPeers } from '../helpers/fleet.ts';

const box = new Sandbox();
let fleet: TestFleet;
let tasks: Task[];
let dir: string;
let collectorDir: string;
let collector: Proc;
let url: string;
let context: BrowserContext | null = null;

beforeAll(async () => {
  dir = await box.tempDir('vt-web-');
  tasks = (await mineLedger(dir)).tasks;
  // Slower generations than other tests' so the campaign visibly runs for a few seconds.
  fleet = await startFleet(box, 'web', 2, tasks, { timeScale: 0.05 });
  const issued = await vtnode(['token', '--data-dir', fleet.dirs[0]!, '--json']);
  if (issued.code !== 0) throw new Error(`token failed: ${issued.stderr}`);
  const joinToken = (JSON.parse(issued.stdout) as { token: string }).token;
  collectorDir = await box.tempDir('vt-web-collector-');
  collector = box.spawn([
    'collect',
    '--token',
    joinToken,
    '--data-dir',
    collectorDir,
    '--listen',
    '/ip4/127.0.0.1/tcp/0',
    '--advert-interval',
    INTERVAL,
    '--out',
    join(collectorDir, 'dataset'),
    '--audit-fraction',
    '0',
    '--catch-up-interval',
    '2s',
    '--ui',
  ]);
  await collector.waitFor(/web view (http:\/\/127\.0\.0\.1:\d+\/)/, 60_000);
  url = /web view (http:\/\/127\.0\.0\.1:\d+\/)/.exec(collector.output())![1]!;
  await waitForPeers(collectorDir, [...fleet.peers, await peerIdOf(collectorDir)], 30_000);

  const profile = await box.tempDir('vt-chromium-');
  context = await launchChromium(profile, { viewport: { width: 1200, height: 900 } });
}, 240_000);

afterAll(async () => {
  await context?.close();
  await box.cleanup();
  await Promise.all(fleet?.servers.map((s) => s.close()) ?? []);
});

/** Every `data-scored` value the page's campaign element showed, in order (recorded in the page). */
async function recordProgress(page: Page): Promise<void> {
  await page.evaluate(() => {
    const w = window as unknown as { seen: number[] };
    w.seen = [];
    const note = () => {
      const el = document.querySelector('[data-testid="campaign"]');
      const v = el ? Number(el.getAttribute('data-scored')) : null;
      if (v !== null && w.seen.at(-1) !== v) w.seen.push(v);
    };
    new MutationObserver(note).observe(document.body, { subtree: true, childList: true, attributes: true });
    note();
  });
}

describe('the web view in Chromium', () => {
  it('shows the fleet, a campaign advancing live, and the dataset growing', async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} (apt-get install chromium)`).toBe(true);
    const page = await context!.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(url);

    // The fleet: both workers and the collector itself, each by its short id.
    const peers = [...fleet.peers, await peerIdOf(collectorDir)];
    await page.waitForFunction(
      (n) => document.querySelectorAll('[data-testid="node"]').length === n,
      peers.length,
      { timeout: 30_000 },
    );
    const shown = await page.$$eval('[data-testid="node"]', (rows) =>
      rows.map((r) => r.getAttribute('data-peer')),
    );
    expect(shown.sort()).toEqual([...peers].sort());
    for (const p of peers)
      await expect(page.getByText(p.slice(-8), { exact: false }).first().isVisible()).resolves.toBe(true);
    expect(await page.getByTestId('live').textContent()).toMatch(/^live/);
    // The page replaced its placeholder.
    expect(await page.locator('#app').textContent()).not.toContain('Loading');

    // A campaign submitted from the collector's node: the page follows it without a reload.
    await page.getByText('No campaign submitted from this node yet').waitFor({ timeout: 10_000 });
    await recordProgress(page);
    const picked = tasks.filter((t) => t.kind === 'file').slice(0, 4);
    const file = await writeTasks(join(dir, 'four.jsonl'), picked);
    const run = runCampaign(collectorDir, file, ['-k', '2', '--campaign', 'watched']);
    const planned = picked.length * 2;
    await page.waitForFunction((p) => (window as unknown as { seen: number[] }).seen.includes(p), planned, {
      timeout: 240_000,
      polling: 200,
    });
    const result = await run;
    expect(result.code, result.stderr).toBe(0);
    const seen = await page.evaluate(() => (window as unknown as { seen: number[] }).seen);
    // Live: the page showed the campaign part-way (more than the start and the end), never going back.
    expect(seen.length, `scored values the page showed: ${seen.join(' → ')}`).toBeGreaterThanOrEqual(3);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
    expect(seen.at(-1)).toBe(planned);
    await expect(page.getByTestId('campaign-progress').textContent()).resolves.toMatch(
      new RegExp(`${planned} / ${planned}`),
    );

    // The dataset: every sample collected, pass@k for the model.
    await eventually(
      async () =>
        (await page.getByTestId('dataset').textContent())?.includes(`${planned} samples`) ? true : null,
      60_000,
      'the dataset panel to show every sample',
    );
    // pass@k follows (its figures are read from the dataset at most every 5 s).
    await page.waitForFunction(
      (p) =>
        document.querySelector('[data-testid="model"][data-model="coder"]')?.getAttribute('data-samples') ===
        String(p),
      planned,
      { timeout: 30_000 },
    );
    expect(errors).toEqual([]);

    if (process.env.VTNODE_SCREENSHOT)
      await page.screenshot({ path: join(REPO, 'docs', 'web-view.png'), fullPage: true });
    await page.close();
  }, 360_000);
});
