// Workspaces over the mesh on real processes (issue 13, build 1): a laptop joins with nothing but a
// token, a model server and --fetch-workspaces. It fetches the example workspace from the two nodes
// that hold it (small chunks, capped bandwidth, so the fetch takes a few seconds); one holder is
// killed halfway. The laptop verifies what arrived, installs it with its lockfile (npm ci), advertises
// it, and then takes jobs whose samples the submitter verifies. A collector that joined with the
// token and no tasks file collects those samples and exports them with the task rows the laptop served.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../node/collector/export.ts';
import type { CollectorStatus } from '../../node/collector/node.ts';
import type { Check } from '../../node/doctor/checks.ts';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import { workspaceId } from '../../node/workspace/content-id.ts';
import { workspaceDirName } from '../../node/workspace/fetch.ts';
import type { Task } from '../../protocol/task.ts';
import { LEDGER, MODEL, mineLedger, runCampaign, writeTasks } from '../helpers/campaign.ts';
import { eventually, type Proc, Sandbox, vtnode } from '../helpers/cli.ts';
import { collectorStatus } from '../helpers/collect.ts';
import { INTERVAL, initFleet, joinNode, peerIdOf, status, waitForPeers } from '../helpers/fleet.ts';
import { notYet } from '../helpers/poll.ts';

const box = new Sandbox();
const servers: Emulator[] = [];
let tasks: Task[];
let dir: string;
let submitter: string;
let holder: Proc;
let holderPeer: string;
let laptop: { dataDir: string; proc: Proc };
let closedParent: string;
let laptopPeer: string;
let id: string;
let collector: { dataDir: string; dataset: string };
/** Filled in by the campaign test: the tasks the laptop ran, and the campaign's scored samples. */
let laptopTaskIds: string[] = [];
let scored = 0;

// 4 KiB chunks at 16 KiB/s per holder: the ~110 KB workspace is ~30 chunks, a few seconds' fetch.
const SERVE = { VTNODE_WORKSPACE_CHUNK_BYTES: '4096', VTNODE_WORKSPACE_BYTES_PER_SECOND: '16384' };

beforeAll(async () => {
  dir = await box.tempDir('vt-wsfetch-');
  tasks = (await mineLedger(dir)).tasks;
  id = await workspaceId(LEDGER);
  for (let i = 0; i < 3; i++)
    servers.push(
      await createEmulator({
        emulate: 'llama-server',
        models: [MODEL],
        tasks,
        timeScale: 0.01,
        concurrency: 2,
        script: 'reference',
      }),
    );
  const holding = (i: number) => [
    '--model-server',
    servers[i]!.url,
    '--workspace',
    LEDGER,
    '--max-jobs',
    '1',
  ];
  const fleet = await initFleet(box, 'wsfetch', holding(0));
  submitter = fleet.dataDir;
  box.spawn(['start', '--data-dir', submitter], SERVE);
  const second = await joinNode(box, fleet.token, holding(1), SERVE);
  holder = second.proc;
  const peers = [await peerIdOf(submitter), await peerIdOf(second.dataDir)];
  holderPeer = peers[1]!;
  for (const d of [submitter, second.dataDir]) await waitForPeers(d, peers, 30_000);
  // Both holders serve the workspace before the laptop joins (each indexes it after starting).
  await Promise.all(
    [submitter, second.dataDir].map((d) =>
      eventually(
        async () => (await status(d)).nodes.find((n) => n.self)?.sandbox.ok,
        60_000,
        'a holder ready',
      ),
    ),
  );
  // A collector with the token only: no tasks file, no workspace (so no audits). It starts before
  // the laptop joins, so that the first test watches the laptop's fetch from its start.
  const cDir = await box.tempDir('vt-wsfetch-collector-');
  collector = { dataDir: cDir, dataset: join(cDir, 'dataset') };
  const c = box.spawn([
    'collect',
    '--data-dir',
    cDir,
    '--token',
    fleet.token,
    '--listen',
    '/ip4/127.0.0.1/tcp/0',
    '--advert-interval',
    INTERVAL,
    '--out',
    collector.dataset,
    '--catch-up-interval',
    '2s',
  ]);
  await c.waitFor(/is collecting/, 60_000);
  // As a root user would deploy it: the data dir inside a folder only root can search (a home, a
  // `mktemp -d` folder), which the sandbox's uid cannot (issue 26, build 4).
  closedParent = await box.tempDir('vt-wsfetch-closed-');
  laptop = await joinNode(
    box,
    fleet.token,
    ['--model-server', servers[2]!.url, '--fetch-workspaces', '--max-jobs', '1'],
    {},
    join(closedParent, 'laptop'),
  );
  laptopPeer = await peerIdOf(laptop.dataDir);
}, 240_000);

afterAll(async () => {
  await box.cleanup();
  await Promise.all(servers.map((s) => s.close()));
});

describe('a laptop that joined with --fetch-workspaces', () => {
  it('fetches the workspace from two holders, one killed halfway, installs it and advertises it', async () => {
    const chunks = join(laptop.dataDir, 'workspaces', `.partial-${workspaceDirName(id)}`, 'chunks');
    const before = await eventually(
      async () => {
        const n = (await readdir(chunks).catch(() => [] as string[])).length;
        return n >= 6 ? n : null;
      },
      90_000,
      'the laptop holding a few chunks',
    );
    // The holder to kill is serving the laptop now (not only listed as a holder).
    await holder.waitFor(/asked for \d+ chunks of sha256:/, 60_000);
    holder.child.kill('SIGKILL');
    await holder.exited;
    // The laptop advertises the workspace once fetched, verified and installed.
    await eventually(
      async () =>
        (await status(submitter)).nodes.find((n) => n.peerId === laptopPeer)?.workspaces.includes(id),
      120_000,
      "the laptop's advert holding the workspace",
    ).catch((err: Error) => {
      // What the laptop said about the workspace, so that a failure names its cause.
      const said = laptop.proc
        .output()
        .split('\n')
        .filter((l) => /workspace/.test(l))
        .slice(-15);
      throw new Error(`${err.message}\n${said.join('\n')}`);
    });
    await laptop.proc.waitFor(new RegExp(`dropping workspace holder ${holderPeer}`));
    await laptop.proc.waitFor(/workspace sha256:[0-9a-f]+ ready in .*installed \(npm ci\)/);
    expect(before).toBeLessThan(30); // the kill came before the fetch was done
    // Nothing untracked or withheld arrived; the partial dir is gone.
    const names = await readdir(join(laptop.dataDir, 'workspaces'));
    expect(names.sort()).toEqual(
      [workspaceDirName(id), `${workspaceDirName(id)}.manifest.json`, `${workspaceDirName(id)}.ready`].sort(),
    );
  }, 240_000);

  it('then takes jobs whose samples the submitter verifies', async () => {
    const file = await writeTasks(
      join(dir, 'tasks.jsonl'),
      tasks.filter((t) => t.kind === 'file').slice(0, 6),
    );
    const res = await runCampaign(submitter, file, ['-k', '2', '--campaign', 'fetched']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.json!.samples).toMatchObject({ planned: 12, scored: 12 });
    const mine = res.json!.nodes.find((n) => n.peerId === laptopPeer);
    expect(mine?.scored ?? 0, JSON.stringify(res.json!.nodes)).toBeGreaterThan(0);
    const laptopTasks = res.json!.tasks.filter((t) => t.nodes.includes(laptopPeer));
    // The model answers with the reference: every sample the laptop scored passes in its fetched
    // workspace (a box that cannot read the workspace fails every test run: reward 0).
    expect(laptopTasks.length).toBeGreaterThan(0);
    for (const t of laptopTasks) expect(t.verified, JSON.stringify(t)).toBe(t.samples);
    laptopTaskIds = laptopTasks.map((t) => t.taskId);
    scored = res.json!.samples.scored;
    // Its boxes read the workspace through the closed folder; the folder itself was left as it was.
    expect((await stat(closedParent)).mode & 0o777).toBe(0o700);
    const doctor = await vtnode(['doctor', '--json', '--data-dir', laptop.dataDir], { timeoutMs: 60_000 });
    const checks = (JSON.parse(doctor.stdout) as { checks: Check[] }).checks;
    expect(checks.find((c) => c.name === 'sandbox reach')).toMatchObject({
      status: 'ok',
      detail: expect.stringContaining(`(under ${closedParent})`),
    });
  }, 240_000);

  it('its verified samples reach a collector given no tasks file, exported with the task rows the laptop served', async () => {
    expect(laptopTaskIds.length).toBeGreaterThan(0);
    // Distinct sample ids, not bodies: a job backed up on a slow machine leaves a second claim of its
    // samples by another origin, and a count of bodies would be met with one sample still missing.
    const complete = (s: CollectorStatus | null) =>
      s && s.stats.samples === scored && s.stats.pending === 0 && s.stats.taskRowsMissing === 0
        ? s
        : notYet(s?.stats);
    const s = await eventually(
      async () => complete(await collectorStatus(collector.dataDir)),
      60_000,
      'the collector holding every sample with its task row',
    );
    expect(s.stats.taskRowsRejected).toBe(0);
    const out = join(await box.tempDir('vt-wsfetch-export-'), 'hf');
    const r = await vtnode(['export', '--from', collector.dataset, '--format', 'hf', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as Manifest;
    expect(manifest.counts).toMatchObject({ missingTasks: 0 });
    // Every task the laptop ran (all k samples of a task run on one node) came from the laptop.
    const sources = new Map(manifest.taskRows.map((t) => [t.taskId, t.source]));
    for (const t of laptopTaskIds) expect(sources.get(t), t).toBe(laptopPeer);
  }, 120_000);
});
