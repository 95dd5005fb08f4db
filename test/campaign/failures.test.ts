// Campaign failure handling with real processes: bad input, failing and hanging model servers, a
// worker killed with -9, a submitter killed with -9 and restarted.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectControl } from '../../node/control/client.ts';
import { DataDir } from '../../node/data-dir.ts';
import type { CampaignStatus } from '../../node/submitter/service.ts';
import { fingerprint } from '../../protocol/canonical.ts';
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
import { startNode } from '../helpers/fleet.ts';

const box = new Sandbox();
let fleet: TestFleet;
let tasks: Task[];
let dir: string;

// Scripted garbage answers score 0 at once (no code block): these tests are about the mechanics.
beforeAll(async () => {
  // The submitter backs up silent jobs on a clock twice as fast as the defaults (15 s of silence, 30 s
  // more for a node that beats; placement/hedge.ts): the hanging model server's jobs are backed up after
  // 15 s instead of 30. Every node the test starts (the restarted submitter too) inherits it.
  process.env['VTNODE_HEDGE_SCALE'] = '0.5';
  dir = await box.tempDir('vt-fail-');
  tasks = (await mineLedger(dir)).tasks;
  fleet = await startFleet(box, 'fail', 3, tasks, { script: 'garbage' });
  await waitReady(fleet.dirs[0]!, 3);
}, 180_000);

afterAll(async () => {
  delete process.env['VTNODE_HEDGE_SCALE'];
  await box.cleanup();
  await Promise.all(fleet?.servers.map((s) => s.close()) ?? []);
});

const completed = () => fleet.servers.reduce((n, s) => n + s.stats().completed, 0);

describe('bad input: clear errors, nothing half-written', () => {
  it('an unknown model, an empty tasks file, a workspace no node holds', async () => {
    const file = await writeTasks(join(dir, 'two.jsonl'), tasks.slice(0, 2));
    const unknown = await runCampaign(fleet.dirs[0]!, file, ['--model', 'nope', '--campaign', 'bad1']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no node of the fleet serves model "nope" \(served: coder\)/);

    const empty = await writeTasks(join(dir, 'empty.jsonl'), []);
    const none = await runCampaign(fleet.dirs[0]!, empty, ['--campaign', 'bad2']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/holds no tasks/);

    const elsewhere = {
      ...tasks[0]!,
      workspace: { ...tasks[0]!.workspace, id: fingerprint('another checkout') },
    };
    const other = await writeTasks(join(dir, 'other.jsonl'), [elsewhere]);
    const missing = await runCampaign(fleet.dirs[0]!, other, ['--campaign', 'bad3']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/1 task use workspace sha256:\w+, which no node serving "coder" holds/);

    const garbled = join(dir, 'garbled.jsonl');
    await writeTasks(garbled, tasks.slice(0, 1));
    await import('node:fs/promises').then((fs) => fs.appendFile(garbled, '{"id": 3}\n'));
    const bad = await runCampaign(fleet.dirs[0]!, garbled, ['--campaign', 'bad4']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/garbled\.jsonl:2: .*kind/);

    // None of them created a campaign.
    for (const name of ['bad1', 'bad2', 'bad3', 'bad4']) {
      const resume = await runCampaign(fleet.dirs[0]!, file, ['--campaign', name, '--resume']);
      expect(resume.stderr).toMatch(new RegExp(`there is no campaign ${name} to resume`));
    }
  }, 120_000);
});

describe('failing nodes', () => {
  it('a model server that returns 500s: its node reports failures, cools down, the work moves on', async () => {
    fleet.servers[1]!.setFaults({ errorRate: 1 });
    try {
      const file = await writeTasks(join(dir, 'six.jsonl'), tasks.slice(0, 6));
      const res = await runCampaign(fleet.dirs[0]!, file, ['-k', '2', '--campaign', 'errors']);
      expect(res.code, res.stderr).toBe(0);
      expect(res.json!.samples).toMatchObject({ planned: 12, generated: 12, scored: 12 });
      expect(res.json!.tasks.flatMap((t) => t.nodes)).not.toContain(fleet.peers[1]);
      expect(fleet.servers[1]!.stats().faults.error).toBeGreaterThan(0);
    } finally {
      fleet.servers[1]!.setFaults({});
    }
  }, 180_000);

  it('a model server that hangs: the job times out and is placed elsewhere', async () => {
    fleet.servers[2]!.setFaults({ hangRate: 1 });
    try {
      const file = await writeTasks(join(dir, 'hang.jsonl'), tasks.slice(6, 12));
      const res = await runCampaign(fleet.dirs[0]!, file, [
        '-k',
        '2',
        '--campaign',
        'hangs',
        '--job-timeout',
        // Long enough for a healthy worker on a loaded CI machine to score a sample (a candidate with a
        // code block is type-checked first: a cold type-check service takes 15 s and more under load,
        // and a worker sends nothing while it scores), short enough that the hanging node's jobs are
        // re-placed well inside the test. (Backups come first: the node is silent for the hedge's 15 s.)
        '45s',
      ]);
      expect(res.code, res.stderr).toBe(0);
      expect(res.json!.samples).toMatchObject({ planned: 12, scored: 12 });
      expect(res.json!.tasks.flatMap((t) => t.nodes)).not.toContain(fleet.peers[2]);
    } finally {
      fleet.servers[2]!.setFaults({});
    }
  }, 180_000);

  it('kill -9 a worker mid-campaign: its unfinished samples are re-placed, none missing or doubled', async () => {
    // Slow answers so the campaign is still running when the worker dies.
    for (const s of fleet.servers) s.setFaults({ slowRate: 1, slowFactor: 200 });
    const file = await writeTasks(join(dir, 'kill.jsonl'), tasks.slice(12, 20));
    const run = box.spawn([
      'run',
      '--data-dir',
      fleet.dirs[0]!,
      '--tasks',
      file,
      '--model',
      'coder',
      '--split',
      'all',
      '-k',
      '3',
      '--campaign',
      'killworker',
      '--json',
    ]);
    const victim = box.procs.find((p) => p.child.spawnargs.includes(fleet.dirs[1]!))!;
    await eventually(async () => fleet.servers[1]!.stats().requests > 0, 60_000, 'the victim to get work');
    victim.child.kill('SIGKILL');
    for (const s of fleet.servers) s.setFaults({});
    expect(await run.exited, run.output().slice(-3000)).toBe(0);
    const json = JSON.parse(run.output().slice(run.output().indexOf('{"campaign"')).split('\n')[0]!);
    expect(json.samples).toMatchObject({ planned: 24, generated: 24, scored: 24 });
    for (const t of json.tasks) expect(t.samples).toBe(3);
  }, 240_000);

  it('kill -9 the submitter mid-campaign: restarted, it resumes without regenerating finished samples', async () => {
    const submitter = fleet.dirs[0]!;
    for (const s of fleet.servers) s.setFaults({ slowRate: 1, slowFactor: 60 });
    const file = await writeTasks(join(dir, 'resume.jsonl'), tasks.slice(20, 28));
    const before = completed();
    const args = [
      '--data-dir',
      submitter,
      '--tasks',
      file,
      '--model',
      'coder',
      '--split',
      'all',
      '-k',
      '3',
      '--campaign',
      'resumed',
    ];
    box.spawn(['run', ...args]);
    const daemon = box.procs.find(
      (p) => p.child.spawnargs.includes('start') && p.child.spawnargs.includes(submitter),
    )!;
    // Some samples scored and recorded by the submitter, others still running.
    const scored = async () => {
      const control = await connectControl(new DataDir(submitter));
      const st = await control.call<CampaignStatus>('POST', '/campaign/status', { name: 'resumed' });
      return st.summary.samples.scored;
    };
    await eventually(async () => (await scored()) >= 6, 60_000, 'some samples to be scored');
    daemon.child.kill('SIGKILL');
    await daemon.exited;
    const generatedBeforeKill = completed() - before;
    for (const s of fleet.servers) s.setFaults({});
    startNode(box, submitter);
    await waitReady(submitter, 2).catch(() => waitReady(submitter, 3));
    const res = await runCampaign(submitter, file, ['-k', '3', '--campaign', 'resumed', '--resume']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(/already scored \(resumed\)/);
    expect(res.json!.samples).toMatchObject({ planned: 24, scored: 24 });
    // Only samples in flight at the kill may have been generated twice.
    expect(completed() - before).toBeLessThanOrEqual(24 + (generatedBeforeKill > 0 ? 6 : 0));
  }, 240_000);
});

describe('campaign outcomes and re-attaching', () => {
  it('a campaign whose samples are given up ends incomplete with exit 1; --resume places them again', async () => {
    for (const s of fleet.servers) s.setFaults({ errorRate: 1 });
    expect(tasks.length).toBeGreaterThanOrEqual(33);
    const file = await writeTasks(join(dir, 'exhaust.jsonl'), tasks.slice(28, 29));
    const args = ['-k', '2', '--campaign', 'exhausted'];
    try {
      const res = await runCampaign(fleet.dirs[0]!, file, [...args, '--max-attempts', '1']);
      expect(res.code, res.stderr).toBe(1);
      expect(res.json, res.stderr).not.toBeNull();
      expect(res.json!.status).toBe('incomplete');
      expect(res.json!.samples).toMatchObject({ planned: 2, scored: 0 });
      expect(res.stderr).toMatch(/campaign exhausted is incomplete: 2 of 2 samples were given up/);
      expect(res.stderr).toMatch(/--campaign exhausted --resume/);
    } finally {
      for (const s of fleet.servers) s.setFaults({});
    }
    const again = await runCampaign(fleet.dirs[0]!, file, [...args, '--resume']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.json!).toMatchObject({ status: 'done', samples: { planned: 2, scored: 2 } });
  }, 240_000);

  it('a detached campaign is re-attached with --resume while it runs, and resumed once it finished', async () => {
    const submitter = fleet.dirs[0]!;
    for (const s of fleet.servers) s.setFaults({ slowRate: 1, slowFactor: 60 });
    const file = await writeTasks(join(dir, 'attach.jsonl'), tasks.slice(29, 33));
    const args = ['--data-dir', submitter, '--tasks', file, '--model', 'coder', '--split', 'all', '-k', '2'];
    const first = box.spawn(['run', ...args, '--campaign', 'attach', '--on-interrupt', 'detach']);
    try {
      await first.waitFor(/campaign attach: 8 samples planned/, 60_000);
      first.child.kill('SIGINT');
      expect(await first.exited, first.output()).toBe(0);
      expect(first.output()).toMatch(/detached: campaign attach goes on in the daemon/);

      // Without --resume the name is refused; with it, the same run is re-attached (not restarted).
      const clash = await runCampaign(submitter, file, ['-k', '2', '--campaign', 'attach']);
      expect(clash.code).toBe(1);
      expect(clash.stderr).toMatch(/campaign attach is running: .*--resume. re-attaches/);
      const other = await runCampaign(submitter, file, ['-k', '3', '--campaign', 'attach', '--resume']);
      expect(other.stderr).toMatch(/running with other settings \(its k is 2\)/);
      for (const s of fleet.servers) s.setFaults({});
      const attached = await runCampaign(submitter, file, ['-k', '2', '--campaign', 'attach', '--resume']);
      expect(attached.code, attached.stderr).toBe(0);
      expect(attached.stderr).toMatch(/campaign attach is running in the daemon: re-attached/);
      expect(attached.json!).toMatchObject({ status: 'done', samples: { planned: 8, scored: 8 } });
      for (const t of attached.json!.tasks) expect(t.samples).toBe(2);
    } finally {
      for (const s of fleet.servers) s.setFaults({});
    }
    // Finished: --resume starts it again, with nothing left to do.
    const done = await runCampaign(submitter, file, ['-k', '2', '--campaign', 'attach', '--resume']);
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toMatch(/8 already scored \(resumed\)/);
    expect(done.json!.samples).toMatchObject({ planned: 8, scored: 8 });
  }, 240_000);
});
