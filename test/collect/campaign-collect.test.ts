import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CollectorStatus } from '../../node/collector/node.ts';
import type { FleetStatus } from '../../node/status.ts';
import { eventually, Sandbox, vtnode } from '../helpers/cli.ts';
import { collectorStatus } from '../helpers/collect.ts';
import { INTERVAL, initFleet, waitForPeers } from '../helpers/fleet.ts';

/** The lying worker's entry: `vtnode join` with an inflating scorer (helpers/lying-worker.ts). */
const LYING_WORKER = join(import.meta.dirname, '..', 'helpers', 'lying-worker.ts');

const box = new Sandbox();
const closers: (() => Promise<void>)[] = [];

afterAll(async () => {
  await box.cleanup();
  await Promise.all(closers.map((c) => c()));
});

describe('collectors through a campaign (separate processes)', () => {
  it('3 workers + 2 collectors: both datasets complete and identical, a restarted collector catches up, an inflating worker is quarantined', async () => {
    // Loaded only when the campaign helpers exist (they come with `vtnode run`).
    const campaign = await import(`../helpers/${'campaign.ts'}`);
    const { createEmulator } = await import('../../node/model-server/emulator.ts');
    const { peerIdOf } = await import('../helpers/fleet.ts');
    const dir = await box.tempDir('vt-campaign-collect-');
    const { tasks } = await campaign.mineLedger(dir);
    const picked = tasks.filter((t: { kind: string }) => t.kind === 'file').slice(0, 6);
    const file = await campaign.writeTasks(join(dir, 'tasks.jsonl'), picked);
    const k = 4;

    const servers: { url: string; close(): Promise<void> }[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await createEmulator({
        emulate: 'llama-server',
        models: [campaign.MODEL],
        tasks: picked,
        timeScale: 0.01,
        concurrency: 4,
        cachePrompts: 4,
        // The liar (node 2) writes only mutants: its inflating scorer can lie only about candidates the
        // sandbox scores below 1 (truncated answers and answers without exactly one code block score 0
        // before any sandbox run; references pass). With the mixed script, a liar given one job (the
        // placement's choice, which changes with the machine's load) can write four samples with no lie
        // to tell (a two-lane `npm test` failed so: no audit failure).
        script: i === 2 ? 'mutants' : 'mixed',
      });
      servers.push(s);
      closers.push(() => s.close());
    }
    // The submitter's own node takes one job slot, the workers two: with generation slots a node
    // holds up to twice its slots, and the submitter's node (never on probation) would otherwise take
    // most of the six tasks, leaving the liar too few samples to be caught lying about.
    const nodeArgs = (i: number) => [
      '--model-server',
      servers[i]!.url,
      '--workspace',
      campaign.LEDGER,
      '--max-jobs',
      i === 0 ? '1' : '2',
    ];
    const { dataDir: d0, token } = await initFleet(box, 'collect-camp', nodeArgs(0));
    box.spawn(['start', '--data-dir', d0]);
    const workerDirs = [d0];
    for (let i = 1; i < 3; i++) {
      const d = await box.tempDir('vt-worker-');
      // Worker 2 lies: every reward it scores is reported as 1 (a node the harness builds).
      const args = [
        token,
        '--data-dir',
        d,
        '--listen',
        '/ip4/127.0.0.1/tcp/0',
        '--advert-interval',
        INTERVAL,
        ...nodeArgs(i),
      ];
      if (i === 2) box.spawn(args, {}, [], LYING_WORKER);
      else box.spawn(['join', ...args]);
      workerDirs.push(d);
    }

    const collectorArgs = (d: string, out: string) => [
      'collect',
      '--data-dir',
      d,
      '--token',
      token,
      '--listen',
      '/ip4/127.0.0.1/tcp/0',
      '--advert-interval',
      INTERVAL,
      '--out',
      out,
      '--tasks',
      file,
      '--workspace',
      campaign.LEDGER,
      '--audit-fraction',
      '1',
      '--catch-up-interval',
      '2s',
    ];
    // The collectors start with the workers (their start-ups overlap): the fleet is the five of them.
    const c1Dir = await box.tempDir('vt-c1-');
    const c2Dir = await box.tempDir('vt-c2-');
    const ds1 = join(c1Dir, 'dataset');
    const ds2 = join(c2Dir, 'dataset');
    box.spawn(collectorArgs(c1Dir, ds1));
    let c2 = box.spawn(collectorArgs(c2Dir, ds2));
    const peers: string[] = [];
    for (const d of workerDirs) peers.push(await peerIdOf(d));
    await c2.waitFor(/is collecting/, 60_000);
    await waitForPeers(d0, [...peers, await peerIdOf(c1Dir), await peerIdOf(c2Dir)], 30_000);

    // Every worker (the liar included) must be placeable: a model, a workspace, a passed sandbox self-test.
    await eventually(
      async () => {
        const st = JSON.parse((await vtnode(['status', '--json', '--data-dir', d0])).stdout) as FleetStatus;
        const workers = st.nodes.filter((n) => peers.includes(n.peerId));
        return (
          workers.length === 3 &&
          workers.every((n) => n.sandbox.ok && n.models.length > 0 && n.workspaces.length > 0)
        );
      },
      60_000,
      'three ready workers',
    );
    const run = campaign.runCampaign(d0, file, ['-k', String(k), '--campaign', 'collected']);
    // Kill collector 2 once the first samples are in, restart it later.
    await eventually(
      async () => ((await collectorStatus(c2Dir))?.stats.digests ?? 0) > 0,
      120_000,
      'first digests at c2',
    );
    c2.child.kill('SIGKILL');
    await c2.exited;
    const res = await run;
    expect(res.code, res.stderr).toBe(0);
    expect(res.json.samples.scored).toBe(picked.length * k);
    c2 = box.spawn(collectorArgs(c2Dir, ds2));

    const total = picked.length * k;
    // Complete: every sample id, every body. A job backed up on a slow machine leaves a second claim of
    // its samples by another origin, so digests may exceed the sample count. Throws what it saw, so a
    // timeout says which count fell short.
    const settled = (s: CollectorStatus | null) => {
      if (s && s.stats.samples === total && s.stats.pending === 0 && s.trust.length === 3) return s;
      throw new Error(`not settled: ${JSON.stringify(s && { stats: s.stats, origins: s.trust.length })}`);
    };
    const s1 = await eventually(
      async () => settled(await collectorStatus(c1Dir)),
      180_000,
      'collector 1 complete',
    );
    const s2 = await eventually(
      async () => settled(await collectorStatus(c2Dir)),
      180_000,
      'collector 2 complete',
    );
    // Audits run in the background (every row: --audit-fraction 1): wait until both collectors judged
    // every sample they hold, and judged them alike.
    await eventually(
      async () => {
        const [a, b] = [await collectorStatus(c1Dir), await collectorStatus(c2Dir)];
        const audited = (s: CollectorStatus) => s.stats.audited === s.stats.bodies;
        if (a && b && audited(a) && audited(b) && a.contentDigest === b.contentDigest) return a;
        throw new Error(`not yet: ${JSON.stringify([a?.stats, b?.stats])}`);
      },
      180_000,
      'identical datasets',
    ).catch((err: Error) => {
      // What the restarted collector said about its audits, so that a stalled audit names its cause.
      const said = c2
        .output()
        .split('\n')
        .filter((l) => /audit|type-check|sandbox|scor/i.test(l))
        .slice(-20);
      throw new Error(`${err.message}\n${said.join('\n')}`);
    });
    expect(s1.stats.bodies).toBe(s1.stats.digests);
    expect(s2.stats.bodies).toBe(s2.stats.digests);

    const liar = peers[2]!;
    const trust = (await collectorStatus(c1Dir))!.trust;
    const liarTrust = trust.find((t) => t.origin === liar);
    // The liar's mutants fail tests; it reported them as 1 and the audit said otherwise.
    expect(liarTrust?.auditFailures ?? 0, JSON.stringify({ liar, trust })).toBeGreaterThan(0);
    expect(liarTrust!.trust).toBeLessThan(1);
    for (const t of trust.filter((x) => x.origin !== liar)) expect(t.auditFailures).toBe(0);
    // `vtnode status` of the collector shows trust per origin, and the fleet sees its collector role.
    const st = await vtnode(['status', '--json', '--data-dir', c1Dir]);
    const fleetStatus = JSON.parse(st.stdout) as FleetStatus;
    expect(fleetStatus.collector!.trust.find((t) => t.origin === liar)!.trust).toBeLessThan(1);
    expect(fleetStatus.nodes[0]!.roles).toContain('collector');
    const human = await vtnode(['status', '--data-dir', c1Dir]);
    expect(human.stdout).toMatch(new RegExp(`trust ${liar.slice(-8)}  0\\.\\d+  SUSPECT`));

    const out1 = join(c1Dir, 'mlx');
    const out2 = join(c2Dir, 'mlx');
    for (const [ds, out] of [
      [ds1, out1],
      [ds2, out2],
    ] as const) {
      const r = await vtnode(['export', '--from', ds, '--format', 'mlx', '--out', out]);
      expect(r.code, r.stderr).toBe(0);
    }
    for (const f of ['train.jsonl', 'valid.jsonl', 'manifest.json'])
      expect(await readFile(join(out2, f), 'utf8')).toBe(await readFile(join(out1, f), 'utf8'));
    const manifest = JSON.parse(await readFile(join(out1, 'manifest.json'), 'utf8'));
    expect(manifest.counts.excluded['audit-failed'] + manifest.counts.excluded.quarantined).toBeGreaterThan(
      0,
    );
    const report = JSON.parse((await vtnode(['report', '--from', ds1, '--json'])).stdout);
    expect(report.models[0]).toMatchObject({
      model: campaign.MODEL,
      tasks: picked.length,
      samples: total,
      k,
    });
  }, 600_000);
});
