// Members that take jobs and never answer (issue 11, Build 5), with real processes: a node built by
// the test harness whose scorer never returns (it accepts, generates, and holds every sample), and an
// honest node whose model server hangs (it accepts and sends nothing). Neither may hold a campaign up
// for the job deadline (30 minutes by default): their jobs are backed up on other nodes once they have
// been silent for much longer than jobs usually are (placement/hedge.ts), the first result of each
// sample counts, and a node whose job was finished by its backup cools down. A node that has not yet
// returned a scored sample holds one job at a time, however many slots it advertises (probation).
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import type { Task } from '../../protocol/task.ts';
import {
  LEDGER,
  mineLedger,
  runCampaign,
  startFleet,
  type TestFleet,
  waitReady,
  writeTasks,
} from '../helpers/campaign.ts';
import { REPO, Sandbox, vtnode } from '../helpers/cli.ts';
import { INTERVAL, peerIdOf } from '../helpers/fleet.ts';

const box = new Sandbox();
let fleet: TestFleet;
let tasks: Task[];
let dir: string;
let hole: { peerId: string; server: Emulator };
/** A small campaign run before the black hole joined: the fault-free time per sample, for the log. */
let baselineMsPerSample = 0;

// Scripted garbage answers score 0 at once (no code block): these tests are about the mechanics.
beforeAll(async () => {
  // The submitter backs up silent jobs on a clock four times faster than the defaults (30 s of silence,
  // 60 s more for a node that beats; placement/hedge.ts): the same rules, a shorter wait in CI. Every
  // node the test starts inherits it (spawned with this process's environment).
  process.env['VTNODE_HEDGE_SCALE'] = '0.25';
  dir = await box.tempDir('vt-hole-');
  tasks = (await mineLedger(dir)).tasks;
  expect(tasks.length).toBeGreaterThanOrEqual(32);
  fleet = await startFleet(box, 'hole', 3, tasks, { script: 'garbage' });
  await waitReady(fleet.dirs[0]!, 3);
  baselineMsPerSample = (await campaign('baseline', 20, 4)).ms / 8;
  const token = await vtnode(['token', '--data-dir', fleet.dirs[0]!]);
  if (token.code !== 0) throw new Error(token.stderr);
  // Its model answers with code, so every sample reaches the scorer that never returns (a garbage
  // answer would be scored 0 without the scorer).
  const server = await createEmulator({
    emulate: 'llama-server',
    models: ['coder'],
    tasks,
    timeScale: 0.01,
    script: 'reference',
  });
  const holeDir = await box.tempDir('vt-hole-node-');
  box.spawn(
    [
      'join',
      token.stdout.trim(),
      '--data-dir',
      holeDir,
      '--listen',
      '/ip4/127.0.0.1/tcp/0',
      '--advert-interval',
      INTERVAL,
      '--model-server',
      server.url,
      '--workspace',
      LEDGER,
      // Many slots advertised: without probation it would be handed most of a campaign at once.
      '--max-jobs',
      '64',
    ],
    {},
    [],
    join(REPO, 'test', 'helpers', 'black-hole-worker.ts'),
  );
  hole = { peerId: await peerIdOf(holeDir), server };
  await waitReady(fleet.dirs[0]!, 4);
}, 240_000);

afterAll(async () => {
  delete process.env['VTNODE_HEDGE_SCALE'];
  await box.cleanup();
  await Promise.all([...(fleet?.servers ?? []), ...(hole ? [hole.server] : [])].map((s) => s.close()));
});

/** Runs `n` tasks from `from` with k = 2 and no --job-timeout (the 30-minute default). */
async function campaign(name: string, from: number, n: number) {
  const file = await writeTasks(join(dir, `${name}.jsonl`), tasks.slice(from, from + n));
  const started = Date.now();
  const res = await runCampaign(fleet.dirs[0]!, file, ['-k', '2', '--campaign', name]);
  expect(res.code, res.stderr).toBe(0);
  expect(res.json!.samples).toMatchObject({ planned: 2 * n, scored: 2 * n });
  return { json: res.json!, ms: Date.now() - started };
}

describe('a member that takes jobs and never answers', () => {
  it('its jobs are backed up and finished elsewhere, long before the job deadline; it scores nothing and cools down', async () => {
    const run = await campaign('black-hole', 0, 12);
    const byNode = new Map(run.json.nodes.map((n) => [n.peerId, n.scored]));
    expect(byNode.get(hole.peerId) ?? 0).toBe(0);
    // It did get work (rendezvous placement gives it a share), so the backups were needed; but on
    // probation (one job until it returns a scored sample) it held a few jobs of k = 2, where its 64
    // advertised slots would have won it most of the 12 tasks at once.
    const held = hole.server.stats().completed;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(12);
    console.log(
      `black hole: 24 samples in ${run.ms} ms (${Math.round(run.ms / 24)} ms per sample; fault-free ${Math.round(baselineMsPerSample)}); ` +
        `${hole.server.stats().completed} generations held by it`,
    );
  }, 240_000);

  it('an honest node whose model server hangs is backed up the same way (it accepted, then sent nothing)', async () => {
    fleet.servers[2]!.setFaults({ hangRate: 1 });
    try {
      const run = await campaign('hung-server', 12, 8);
      const byNode = new Map(run.json.nodes.map((n) => [n.peerId, n.scored]));
      expect(byNode.get(fleet.peers[2]!) ?? 0).toBe(0);
      expect(fleet.servers[2]!.stats().faults.hang).toBeGreaterThan(0);
      console.log(
        `hung model server: 16 samples in ${run.ms} ms (fault-free: ${Math.round(baselineMsPerSample)} ms per sample)`,
      );
    } finally {
      fleet.servers[2]!.setFaults({});
    }
  }, 240_000);
});
