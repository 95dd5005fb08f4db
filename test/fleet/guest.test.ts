// A laptop's manners on real processes (issue 13, build 4): a node that joined with
// --pause-on-battery is unplugged (its power supply faked through VTNODE_POWER_SUPPLY_DIR, laid out
// like /sys/class/power_supply) while it runs a job. It finishes the job it had, takes no new one,
// says so in its advert (placement sees no capacity), and takes jobs again once plugged back in.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import type { FleetStatus } from '../../node/status.ts';
import type { Task } from '../../protocol/task.ts';
import { LEDGER, MODEL, mineLedger, runCampaign, waitReady, writeTasks } from '../helpers/campaign.ts';
import { eventually, Sandbox } from '../helpers/cli.ts';
import { initFleet, joinNode, peerIdOf, startNode, status, waitForPeers } from '../helpers/fleet.ts';

const box = new Sandbox();
const servers: Emulator[] = [];
let tasks: Task[];
let dir: string;
let power: string;
let submitter: string;
let laptop: string;
let laptopPeer: string;

async function plug(online: boolean): Promise<void> {
  await writeFile(join(power, 'AC', 'online'), online ? '1\n' : '0\n');
  await writeFile(join(power, 'BAT0', 'status'), online ? 'Charging\n' : 'Discharging\n');
}

const guestOf = async (d: string): Promise<NonNullable<FleetStatus['guest']>> => (await status(d)).guest!;

beforeAll(async () => {
  dir = await box.tempDir('vt-guest-');
  tasks = (await mineLedger(dir)).tasks;
  power = join(dir, 'power_supply');
  await mkdir(join(power, 'AC'), { recursive: true });
  await mkdir(join(power, 'BAT0'));
  await writeFile(join(power, 'AC', 'type'), 'Mains\n');
  await writeFile(join(power, 'BAT0', 'type'), 'Battery\n');
  await writeFile(join(power, 'BAT0', 'capacity'), '64\n');
  await plug(true);
  // The laptop's server is slow enough that a job is still running when it is unplugged.
  for (const timeScale of [0.01, 0.3, 0.01])
    servers.push(
      await createEmulator({
        emulate: 'llama-server',
        models: [MODEL],
        tasks,
        timeScale,
        concurrency: 2,
        script: 'reference',
      }),
    );
  const args = (i: number) => ['--model-server', servers[i]!.url, '--workspace', LEDGER, '--max-jobs', '1'];
  const fleet = await initFleet(box, 'guest', args(0));
  submitter = fleet.dataDir;
  startNode(box, submitter);
  laptop = (
    await joinNode(box, fleet.token, [...args(1), '--pause-on-battery'], {
      VTNODE_POWER_SUPPLY_DIR: power,
      VTNODE_GUEST_INTERVAL_MS: '200',
    })
  ).dataDir;
  const other = (await joinNode(box, fleet.token, args(2))).dataDir;
  const dirs = [submitter, laptop, other];
  const peers = await Promise.all(dirs.map((d) => peerIdOf(d)));
  laptopPeer = peers[1]!;
  for (const d of dirs) await waitForPeers(d, peers, 30_000);
  await waitReady(submitter, 3);
}, 240_000);

afterAll(async () => {
  await box.cleanup();
  await Promise.all(servers.map((s) => s.close()));
});

describe('a laptop that joined with --pause-on-battery', () => {
  it('unplugged mid-job: finishes the job it had, takes no new one, and says so in its advert', async () => {
    const file = await writeTasks(
      join(dir, 'tasks.jsonl'),
      tasks.filter((t) => t.kind === 'file').slice(0, 6),
    );
    const run = runCampaign(submitter, file, ['-k', '2', '--campaign', 'unplugged']);
    await eventually(
      async () => (await status(laptop)).nodes.find((n) => n.self)!.load.running >= 1,
      120_000,
      'the laptop running a job',
    );
    await plug(false);
    const paused = await eventually(
      async () => {
        const g = await guestOf(laptop);
        return g.paused ? g : null;
      },
      30_000,
      'the laptop pausing',
    );
    expect(paused.paused).toBe('on battery (64%)');
    expect(paused.acceptedAtPause).toBeGreaterThanOrEqual(1);
    // The submitter sees the pause in the laptop's advert: no capacity, and why.
    await eventually(
      async () => {
        const n = (await status(submitter)).nodes.find((x) => x.peerId === laptopPeer);
        return n?.paused === 'on battery (64%)' && n.load.capacity === 0;
      },
      30_000,
      "the laptop's advert saying it is paused",
    );

    const res = await run;
    expect(res.code, res.stderr).toBe(0);
    expect(res.json!.samples).toMatchObject({ planned: 12, scored: 12 });
    const g = await guestOf(laptop);
    expect(g.paused).toBe('on battery (64%)');
    // No job after the pause; the one(s) it had were finished there, not handed back.
    expect(g.accepted).toBe(paused.acceptedAtPause);
    const laptopTasks = res.json!.tasks.filter((t) => t.nodes.includes(laptopPeer));
    expect(laptopTasks.length).toBeGreaterThanOrEqual(1);
    for (const t of laptopTasks) expect(t.nodes, t.taskId).toEqual([laptopPeer]);
  }, 300_000);

  it('plugged back in: resumes and advertises its capacity again', async () => {
    await plug(true);
    await eventually(async () => (await guestOf(laptop)).paused === null, 30_000, 'the laptop resuming');
    await eventually(
      async () => {
        const n = (await status(submitter)).nodes.find((x) => x.peerId === laptopPeer);
        return n !== undefined && n.paused === undefined && n.load.capacity === 1;
      },
      30_000,
      "the laptop's advert offering its slot again",
    );
  }, 120_000);
});
