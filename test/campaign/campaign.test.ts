// Campaigns through real vtnode processes on loopback: a submitter and workers, each worker with
// its own OpenAI-compatible test server, scoring in the real sandbox.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../protocol/task.ts';
import {
  mineLedger,
  runCampaign,
  startFleet,
  type TestFleet,
  waitReady,
  writeTasks,
} from '../helpers/campaign.ts';
import { eventually, Sandbox } from '../helpers/cli.ts';
import { status } from '../helpers/fleet.ts';
import { notYet } from '../helpers/poll.ts';

const box = new Sandbox();
let fleet: TestFleet;
let tasks: Task[];
let dir: string;

beforeAll(async () => {
  dir = await box.tempDir('vt-campaign-');
  tasks = (await mineLedger(dir)).tasks;
  fleet = await startFleet(box, 'camp', 3, tasks);
  await waitReady(fleet.dirs[0]!, 3);
}, 180_000);

afterAll(async () => {
  await box.cleanup();
  await Promise.all(fleet?.servers.map((s) => s.close()) ?? []);
});

describe('a campaign on a submitter and 3 workers', () => {
  let first: Awaited<ReturnType<typeof runCampaign>>['json'];
  let file: string;
  let picked: Task[];

  it('generates, scores and reports every sample; all k samples of a task run on one node', async () => {
    picked = tasks.filter((t) => t.kind === 'file').slice(0, 4);
    file = await writeTasks(`${dir}/four.jsonl`, picked);
    const t0 = performance.now();
    const res = await runCampaign(fleet.dirs[0]!, file, ['-k', '2', '--campaign', 'first']);
    const cliSeconds = (performance.now() - t0) / 1000;
    expect(res.code, res.stderr).toBe(0);
    first = res.json!;
    expect(first.status).toBe('done');
    // The daemon's own time for the campaign, without the CLI's start: within the CLI's wall time.
    expect(first.campaignSeconds).toBeGreaterThan(0);
    expect(first.campaignSeconds!).toBeLessThan(cliSeconds);
    expect(first.samples).toMatchObject({ planned: 8, generated: 8, scored: 8 });
    // The test server answers with each task's reference: every sample verifies.
    expect(first.samples.verified).toBe(8);
    expect(first.tasks).toHaveLength(4);
    for (const t of first.tasks) {
      expect(t.samples).toBe(2);
      expect(t.nodes, `${t.taskId} ran on one node`).toHaveLength(1);
    }
    // Work went to more than one node.
    expect(new Set(first.tasks.map((t) => t.nodes[0])).size).toBeGreaterThan(1);
  }, 240_000);

  it('a second campaign over the same tasks lands on the nodes that are warm for them', async () => {
    // Placement reads the workers' adverts, which are periodic: wait until the submitter holds, for
    // every node of the first campaign, an advert that is idle and warm for at least the tasks it ran
    // (else a loaded machine places the second campaign on adverts older than the first one's end).
    const ran = new Map<string, number>();
    for (const t of first!.tasks) ran.set(t.nodes[0]!, (ran.get(t.nodes[0]!) ?? 0) + 1);
    await eventually(
      async () => {
        const nodes = (await status(fleet.dirs[0]!)).nodes;
        const behind = [...ran].filter(([peer, n]) => {
          const a = nodes.find((x) => x.peerId === peer);
          return !a || a.warm < n || a.load.running > 0 || a.load.queued > 0;
        });
        return behind.length === 0 ? true : notYet(behind.map(([p]) => p.slice(-8)));
      },
      60_000,
      "idle, warm adverts of the first campaign's nodes",
    );
    const res = await runCampaign(fleet.dirs[0]!, file, ['-k', '2', '--campaign', 'second', '--seed', '100']);
    expect(res.code, res.stderr).toBe(0);
    const second = res.json!;
    // A job goes to a node warm for its prompt while that node stays within its load cap
    // (placement/placer.ts: ⌈1.1 × the mean load⌉, the job counted, over the jobs placed so far): a
    // node that ran one task of the first campaign gets it again, and a node that ran two gets at
    // least the first of them in the file's order (the other may spill: four jobs on three nodes
    // allow one node two only from the third job on, whatever the first campaign's timing allowed).
    const firstNode = new Map(first!.tasks.map((t) => [t.taskId, t.nodes[0]!]));
    const secondNodes = new Map(second.tasks.map((t) => [t.taskId, t.nodes]));
    const served = new Set<string>();
    for (const t of picked) {
      const node = firstNode.get(t.id)!;
      if (!served.has(node)) expect(secondNodes.get(t.id), `${t.id} back on its warm node`).toEqual([node]);
      served.add(node);
    }
    // The prompts placed warm were in their node's cache: more cache hits than the cold first campaign.
    expect(first!.cacheHitRate).toBeLessThan(1);
    expect(second.cacheHitRate!).toBeGreaterThan(first!.cacheHitRate!);
    expect(second.seed).toBe(100);
  }, 240_000);

  // Issue 13, build 5: sample ids are a function of (task, model, index, seed); with one default seed,
  // a second round returned the rows the workers had logged in the first and produced no new data.
  it('a campaign without --seed samples anew; one run again with a --seed says its samples are not new', async () => {
    const third = (await runCampaign(fleet.dirs[0]!, file, ['-k', '2', '--campaign', 'third'])).json!;
    expect(third.status).toBe('done');
    expect(third.seed).not.toBe(first!.seed);
    expect(third.samples).toMatchObject({ scored: 8, preexisting: 0 });

    const again = await runCampaign(fleet.dirs[0]!, file, [
      '-k',
      '2',
      '--campaign',
      'fourth',
      '--seed',
      '100',
    ]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.json!.seed).toBe(100);
    expect(again.json!.samples).toMatchObject({ scored: 8, preexisting: 8 });
  }, 240_000);
});
