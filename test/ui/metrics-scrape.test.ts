// /metrics scraped from real nodes (separate processes, libp2p over loopback TCP, the real sandbox)
// before and after a small campaign: the counters moved by exactly the campaign's numbers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSnapshot, type Snapshot } from '../../node/ui/snapshot-schema.ts';
import type { Task } from '../../protocol/task.ts';
import {
  MODEL,
  mineLedger,
  runCampaign,
  startFleet,
  type TestFleet,
  waitReady,
  writeTasks,
} from '../helpers/campaign.ts';
import { eventually, freePort, Sandbox } from '../helpers/cli.ts';

const box = new Sandbox();
let fleet: TestFleet;
let tasks: Task[];
let dir: string;
const ports: number[] = [];

/** Parses Prometheus text: `name{labels} value` lines into a map keyed by `name{labels}`. */
function parseProm(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** Sum of the samples of `name` whose labels include every `label="value"` given. */
function sum(samples: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const [key, value] of samples) {
    if (key !== name && !key.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => key.includes(`${k}="${v}"`))) total += value;
  }
  return total;
}

/** The web view's snapshot of a node (`/api/state`). */
async function state(port: number): Promise<Snapshot> {
  const res = await fetch(`http://127.0.0.1:${port}/api/state`);
  expect(res.status).toBe(200);
  return parseSnapshot(await res.text(), `/api/state of :${port}`);
}

async function scrape(port: number): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseProm(await res.text());
}

beforeAll(async () => {
  dir = await box.tempDir('vt-metrics-');
  tasks = (await mineLedger(dir)).tasks;
  for (let i = 0; i < 2; i++) ports.push(await freePort());
  fleet = await startFleet(box, 'metrics', 2, tasks, {}, (i) => ['--ui', String(ports[i])]);
  await waitReady(fleet.dirs[0]!, 2);
}, 180_000);

afterAll(async () => {
  await box.cleanup();
  await Promise.all(fleet?.servers.map((s) => s.close()) ?? []);
});

describe('/metrics after a campaign', () => {
  it('samples generated, scored, verified, tokens and placements moved by exactly the campaign', async () => {
    const before = await Promise.all(ports.map(scrape));
    const picked = tasks.filter((t) => t.kind === 'file').slice(0, 3);
    const file = await writeTasks(`${dir}/three.jsonl`, picked);
    const res = await runCampaign(fleet.dirs[0]!, file, ['-k', '2', '--campaign', 'scraped']);
    expect(res.code, res.stderr).toBe(0);
    const run = res.json!;
    // (How many verify depends on the sandbox's verdicts, not on what is counted: any number will do.)
    expect(run.samples).toMatchObject({ planned: 6, generated: 6, scored: 6 });
    const after = await Promise.all(ports.map(scrape));

    const moved = (name: string, labels: Record<string, string> = {}) =>
      after.reduce((t, s, i) => t + sum(s, name, labels) - sum(before[i]!, name, labels), 0);
    expect(moved('vtnode_samples_generated_total', { model: MODEL })).toBe(run.samples.generated);
    expect(moved('vtnode_samples_scored_total', { model: MODEL })).toBe(run.samples.scored);
    expect(moved('vtnode_samples_scored_total', { verdict: 'pass' })).toBe(run.samples.verified);
    expect(moved('vtnode_samples_verified_total', { model: MODEL })).toBe(run.samples.verified);
    // One scoring per sample (the emulator answers references: none is cut short or unparsable).
    expect(moved('vtnode_scoring_seconds_count')).toBe(run.samples.scored);
    expect(moved('vtnode_scoring_seconds_sum')).toBeGreaterThan(0);
    expect(moved('vtnode_completion_tokens_total')).toBeGreaterThan(0);
    // Per node: what each worker's counters say matches what the campaign says it did.
    for (const [i, peer] of fleet.peers.entries()) {
      const scored = run.nodes.find((n) => n.peerId === peer)?.scored ?? 0;
      const delta =
        sum(after[i]!, 'vtnode_samples_scored_total') - sum(before[i]!, 'vtnode_samples_scored_total');
      expect(delta, `node ${i}`).toBe(scored);
    }
    // One job per task, placed once by the submitter (node 0), each by one of the placer's reasons.
    const placed = (kind: string) =>
      sum(after[0]!, 'vtnode_placements_total', { kind }) -
      sum(before[0]!, 'vtnode_placements_total', { kind });
    expect(placed('warm') + placed('owner') + placed('spill')).toBe(picked.length);
    expect(placed('hedge')).toBe(0);
    expect(moved('vtnode_placements_total') - (placed('warm') + placed('owner') + placed('spill'))).toBe(0);
    // Digests: one published per sample by the workers (before each sample's result went back).
    expect(moved('vtnode_gossip_messages_total', { topic: 'digest', direction: 'out' })).toBe(
      run.samples.scored,
    );
    // Node's process metrics are there too.
    expect(sum(after[0]!, 'vtnode_process_resident_memory_bytes')).toBeGreaterThan(0);

    // Gossip arrives on its own time: the other node accepts each digest once, none is rejected,
    // adverts flow; and the executors are idle again (a job ends just after its last result).
    const settled = await eventually(
      async () => {
        const now = await Promise.all(ports.map(scrape));
        const delta = (name: string, labels: Record<string, string>) =>
          now.reduce((t, s, i) => t + sum(s, name, labels) - sum(before[i]!, name, labels), 0);
        const idle = now.every((s) => sum(s, 'vtnode_queue_depth') === 0);
        const received = delta('vtnode_gossip_messages_total', { topic: 'digest', direction: 'in' });
        return idle && received >= run.samples.scored ? { now, received, delta } : null;
      },
      30_000,
      'digests accepted by the other node and idle executors',
    );
    expect(settled.received).toBe(run.samples.scored);
    expect(settled.delta('vtnode_gossip_messages_total', { direction: 'rejected' })).toBe(0);
    expect(settled.delta('vtnode_gossip_messages_total', { direction: 'ignored' })).toBe(0);
    for (const s of settled.now)
      expect(sum(s, 'vtnode_gossip_messages_total', { topic: 'advert', direction: 'in' })).toBeGreaterThan(0);

    // Warm lists travel as deltas to the previous advert (protocol/warm-delta.ts): each node's view
    // of the other holds as many warm prompts as the other says it has, and the campaign warmed some.
    const views = async () => {
      const states = await Promise.all(ports.map((p) => state(p)));
      const own = new Map(
        states.map((st) => [st.nodes.find((n) => n.self)!.peerId, st.nodes.find((n) => n.self)!.warm]),
      );
      return { own, agree: states.every((st) => st.nodes.every((n) => n.warm === own.get(n.peerId))) };
    };
    await eventually(async () => ((await views()).agree ? true : null), 30_000, 'warm lists agreeing');
    // And they keep agreeing across the next adverts (most of which carry deltas, not whole lists).
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 500));
      const v = await views();
      expect(v.agree, `poll ${i}: ${JSON.stringify([...v.own])}`).toBe(true);
      expect([...v.own.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    }
  }, 240_000);
});
