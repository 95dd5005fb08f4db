// A full disk under a worker's and a collector's data dirs, with real processes (issue 11, Build 4):
// two workers (one with its data dir on a small tmpfs), a collector whose data dir and dataset are
// on the same tmpfs, an emulated model server per worker. Filled to the last byte: the worker
// advertises no capacity and says why, the campaign runs on the other worker, the collector stops
// fetching and says why; nothing logged is lost; freed, both resume on their own.
// Mounting a tmpfs needs root (CI runs as root): skipped otherwise.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import type { FleetStatus } from '../../node/status.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import type { Task } from '../../protocol/task.ts';
import { LEDGER, MODEL, mineLedger, runCampaign, writeTasks } from '../helpers/campaign.ts';
import { eventually, type Proc, Sandbox, vtnode } from '../helpers/cli.ts';
import { INTERVAL, initFleet, startNode, status, waitForPeers } from '../helpers/fleet.ts';
import { notYet } from '../helpers/poll.ts';
import { canMount, fillDisk, freeDisk, mountTmpfs, unmount } from '../helpers/storage.ts';

const box = new Sandbox();
const servers: Emulator[] = [];
let mnt = '';
let mounted = false;
let tasks: Task[] = [];
let work = '';
/** [submitter + worker on a normal disk, worker on the tmpfs]. */
const dirs: string[] = [];
const peers: string[] = [];
let worker1: Proc;
let collector: Proc;
let collectorDir = '';
let dataset = '';

beforeAll(async () => {
  if (!canMount) return;
  work = await box.tempDir('vt-diskfull-');
  tasks = (await mineLedger(work)).tasks;
  // Not a box dir: the box removes its dirs while the tmpfs may still be mounted.
  mnt = await mkdtemp(join(tmpdir(), 'vt-diskfull-mnt-'));
  await mountTmpfs(mnt, 96 * 2 ** 20);
  mounted = true;
  for (let i = 0; i < 2; i++)
    servers.push(
      await createEmulator({
        emulate: 'llama-server',
        models: [MODEL],
        tasks,
        timeScale: 0.01,
        concurrency: 4,
        script: 'garbage',
      }),
    );
  const args = (i: number) => ['--model-server', servers[i]!.url, '--workspace', LEDGER, '--max-jobs', '2'];
  const boot = await initFleet(box, 'diskfull', args(0));
  startNode(box, boot.dataDir);
  dirs.push(boot.dataDir, join(mnt, 'worker'));
  worker1 = box.spawn([
    'join',
    boot.token,
    '--data-dir',
    dirs[1]!,
    '--listen',
    '/ip4/127.0.0.1/tcp/0',
    '--advert-interval',
    INTERVAL,
    ...args(1),
  ]);
  // Starting a worker hashes its workspace: slow on a loaded machine.
  for (const d of dirs) peers.push(await startedPeer(d));
  await waitForPeers(dirs[0]!, peers, 30_000);
  await eventually(
    async () => (await status(dirs[0]!)).nodes.every((n) => n.sandbox.ok && n.load.capacity === 2),
    90_000,
    'both workers ready',
  );
  collectorDir = join(mnt, 'collector');
  dataset = join(mnt, 'dataset');
  collector = box.spawn([
    'collect',
    '--token',
    boot.token,
    '--data-dir',
    collectorDir,
    '--out',
    dataset,
    '--audit-fraction',
    '0',
    '--catch-up-interval',
    '2s',
    '--listen',
    '/ip4/127.0.0.1/tcp/0',
    '--advert-interval',
    INTERVAL,
  ]);
  await startedPeer(collectorDir);
}, 300_000);

/** The peer id of the node of `dir` once it answers (bounded; its output on failure). */
const startedPeer = (dir: string) =>
  eventually(async () => (await status(dir)).self, 90_000, `${dir} to answer status`).catch((err: Error) => {
    const proc = box.procs.find((p) => p.child.spawnargs.includes(dir));
    throw new Error(`${err.message}\n${proc?.output().slice(-3000) ?? ''}`);
  });

afterAll(async () => {
  try {
    await box.cleanup();
    await Promise.all(servers.map((s) => s.close()));
  } finally {
    if (mounted) {
      await unmount(mnt);
      await rm(mnt, { recursive: true, force: true });
    }
  }
});

type CollectorSection = NonNullable<FleetStatus['collector']> & {
  stats: { digests: number; samples: number; bodies: number; pending: number };
};
const collectorStatus = async () => (await status(collectorDir)).collector as CollectorSection;
const capacityOf = async (peer: string) =>
  (await status(dirs[0]!)).nodes.find((n) => n.peerId === peer)?.load.capacity;

/**
 * Waits until the collector holds `n` sample ids, every body fetched. Distinct ids, not digests: a job
 * backed up on a slow machine leaves a second claim of its samples by another origin (more digests).
 */
const collected = (n: number, timeoutMs = 60_000) =>
  eventually(
    async () => {
      const c = await collectorStatus();
      return c.stats.samples === n && c.stats.pending === 0 ? c : notYet(c.stats);
    },
    timeoutMs,
    `the collector to hold ${n} samples`,
  );

describe.skipIf(!canMount)(
  'a full disk under a worker and a collector (a tmpfs: needs root allowed to mount)',
  () => {
    let filler = '';
    let before = 0;

    it('with space: both workers take work, the collector gets every sample', async () => {
      const res = await runCampaign(dirs[0]!, await writeTasks(join(work, 'a.jsonl'), tasks.slice(0, 6)), [
        '-k',
        '2',
        '--campaign',
        'a',
      ]);
      expect(res.code, res.stderr).toBe(0);
      expect(res.json!.samples).toMatchObject({ planned: 12, scored: 12 });
      expect(new Set(res.json!.tasks.flatMap((t) => t.nodes))).toEqual(new Set(peers));
      await collected(12);
      before = res.json!.nodes.find((n) => n.peerId === peers[1])!.scored;
      expect(before).toBeGreaterThan(0);
    }, 240_000);

    it('filled: the worker advertises no capacity and says why; the collector stops fetching and says why', async () => {
      filler = await fillDisk(mnt);
      await eventually(
        async () => (await capacityOf(peers[1]!)) === 0,
        20_000,
        'the full worker to advertise 0',
      );
      expect((await status(dirs[1]!)).storage).toMatch(/^the data dir's disk is full \(.*MiB free, below/);
      await worker1.waitFor(/is full: .*This node advertises no job capacity and refuses jobs/);
      await eventually(
        async () => (await collectorStatus()).storage,
        20_000,
        'the collector to say it is full',
      );
      await collector.waitFor(/is full: .*The collector stops fetching digests and bodies until space frees/);
      const text = await vtnode(['status', '--data-dir', collectorDir]);
      expect(text.stdout).toMatch(/not fetching: the dataset's disk is full/);
      // The other worker is untouched.
      expect(await capacityOf(peers[0]!)).toBe(2);
    }, 60_000);

    it('full: the campaign runs on the other worker only, and completes', async () => {
      const res = await runCampaign(dirs[0]!, await writeTasks(join(work, 'b.jsonl'), tasks.slice(6, 10)), [
        '-k',
        '2',
        '--campaign',
        'b',
      ]);
      expect(res.code, res.stderr).toBe(0);
      expect(res.json!.samples).toMatchObject({ planned: 8, scored: 8 });
      expect(res.json!.tasks.flatMap((t) => t.nodes)).not.toContain(peers[1]);
      // Still full: the worker still refuses, the collector still says so.
      expect(await capacityOf(peers[1]!)).toBe(0);
      expect((await collectorStatus()).storage).toMatch(/full/);
    }, 240_000);

    it('freed: both resume on their own; the collector catches up on what it missed, nothing lost', async () => {
      await freeDisk(filler);
      await eventually(
        async () => (await capacityOf(peers[1]!)) === 2,
        30_000,
        'the worker to advertise capacity',
      );
      expect((await status(dirs[1]!)).storage).toBeUndefined();
      await worker1.waitFor(/has space again: resuming/);
      await collected(20, 90_000);
      expect((await collectorStatus()).storage).toBeUndefined();

      // Campaign a's tasks again with other seeds (new samples): their prompts are warm on the worker
      // that ran them, so placement sends that worker its share again, and it logs new samples.
      const res = await runCampaign(dirs[0]!, join(work, 'a.jsonl'), [
        '-k',
        '2',
        '--campaign',
        'c',
        '--seed',
        '100',
      ]);
      expect(res.code, res.stderr).toBe(0);
      expect(res.json!.tasks.flatMap((t) => t.nodes)).toContain(peers[1]);
      const after = res.json!.nodes.find((n) => n.peerId === peers[1])!.scored;
      await collected(20 + res.json!.samples.scored);

      // The worker's log: every sample it ever scored, seqs 1..n, no loss recorded, the file intact.
      expect((await vtnode(['leave', '--data-dir', dirs[1]!])).code).toBe(0);
      await worker1.exited;
      const log = openSampleLog({ path: join(dirs[1]!, 'samples.db'), origin: peers[1]! });
      expect(log.counts()).toMatchObject({ samples: before + after, highWater: before + after });
      expect(log.lostSince(0, 10)).toEqual([]);
      log.close();
    }, 300_000);
  },
);
