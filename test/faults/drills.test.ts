// Multi-host fault drills (issue 11, Build 4): six hosts in network namespaces on a bridge (helpers/
// netns.ts, root only), a submitter that also works, three more workers, each with its own emulated
// model server, and two collectors (helpers/drill-fleet.ts). Workers score with the fast reference-hash
// script, so the drills measure the mesh. A fault-free reference run first; then, in a fresh fleet, the
// same samples in two campaigns, each with its faults:
//   net:    a worker host cut off the bridge for 30 s mid-job, a worker SIGSTOPped for 60 s mid-job,
//           a collector killed with -9 and restarted on its data dir;
//   models: a model server killed, one SIGSTOPped (hangs), one answering chat requests with garbage
//           (HTTP 200, no chat completion) while its probes still answer.
// Each must complete (status done, exit 0), and the drilled dataset must equal the reference: the
// same sample ids with the same content and reward, none lost or doubled, both collectors' content
// digests and exports identical.

import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATASET_DB } from '../../node/collector/store.ts';
import { SAMPLE_LOG_DB } from '../../node/worker/sample-log.ts';
import { sampleId, sampleSeed } from '../../protocol/job.ts';
import type { Task } from '../../protocol/task.ts';
import { MODEL, mineLedger, type RunJson, writeTasks } from '../helpers/campaign.ts';
import { Sandbox, vtnode } from '../helpers/cli.ts';
import { collectorHolds, collectorStatus } from '../helpers/collect.ts';
import {
  CAMPAIGN_SEED,
  COLLECTORS,
  campaignResult,
  DrillFleet,
  type Fleet,
  HOSTS,
  poll,
  WORKERS,
} from '../helpers/drill-fleet.ts';
import { type DatasetSample, datasetSamples } from '../helpers/load-fleet.ts';
import { canCreateNetworks, createTestNetwork, type TestNetwork } from '../helpers/netns.ts';
import { notYet } from '../helpers/poll.ts';

const K = 2;
const PARTITION_MS = 30_000;
const STOP_MS = 60_000;

const box = new Sandbox();
let net: TestNetwork | null = null;
const enabled = await canCreateNetworks();
const started = Date.now();
const events: string[] = [];
const log = (line: string) => {
  const l = `[+${((Date.now() - started) / 1000).toFixed(1)} s] ${line}`;
  events.push(l);
  process.stdout.write(`drill ${l}\n`);
};
/** Runs a drill step; a failure is logged (the drill log is printed at the end) and rethrown. */
async function step(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    log(`${name} FAILED: ${(err as Error).message.slice(0, 4000)}`);
    // What the submitter did with its jobs (placements, releases, failures), for the post-mortem.
    const submitter = fleet?.procs[0]?.output() ?? '';
    const jobs = submitter.split('\n').filter((l) => /job |released|refused|lost|failed|cooling/.test(l));
    log(`submitter's job log (last 60 lines):\n${jobs.slice(-60).join('\n')}`);
    throw err;
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let drill: DrillFleet;
let tasksA: Task[];
let tasksB: Task[];
const files = { all: '', a: '', b: '' };

beforeAll(async () => {
  if (!enabled) return;
  net = await createTestNetwork(HOSTS);
  const dir = await box.tempDir('vt-drills-');
  const tasks = (await mineLedger(dir)).tasks;
  tasksA = tasks.slice(0, 6);
  tasksB = tasks.slice(6, 14);
  files.all = await writeTasks(join(dir, 'all.jsonl'), [...tasksA, ...tasksB]);
  files.a = await writeTasks(join(dir, 'a.jsonl'), tasksA);
  files.b = await writeTasks(join(dir, 'b.jsonl'), tasksB);
  drill = new DrillFleet({ box, net, tasksFile: files.all, timeScale: 0.1, log });
  await Promise.all([0, 1, 2, 3].map((h) => drill.startModelServer(h)));
  log('network and model servers up');
}, 240_000);

afterAll(async () => {
  if (events.length) process.stdout.write(`drill log:\n${events.join('\n')}\n`);
  await box.cleanup();
  await net?.destroy();
});

/** Every file under `dir`, by relative path. */
async function filesOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out[relative(dir, p)] = await readFile(p, 'utf8');
    }
  };
  await walk(dir);
  return out;
}

/** Sample id → "content reward" of a dataset; every origin holding a sample must hold the same one. */
function contentById(rows: DatasetSample[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of rows) {
    const v = `${r.contentHash} ${r.reward}`;
    const seen = out.get(r.sampleId);
    if (seen !== undefined && seen !== v)
      throw new Error(`sample ${r.sampleId}: ${seen} and ${v} from two origins`);
    out.set(r.sampleId, v);
  }
  return out;
}

/** Waits until both collectors hold every id of `want` with a body, nothing pending (bounded). */
async function collectorsHold(f: Fleet, want: Set<string>, what: string): Promise<void> {
  await Promise.all(
    COLLECTORS.map((h) =>
      collectorHolds({
        dataDir: f.dirs[h]!,
        dataset: f.datasets.get(h)!,
        want,
        what: `the collector on host ${h} to hold ${what}`,
        timeoutMs: 120_000,
        pauseMs: 2000,
      }),
    ),
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${drill.tails(f)}`);
  });
}

/** `origin seq` of every row of a sqlite table `samples` (read-only, while its writer runs). */
function rowsOf(db: string, query: string): string[] {
  const d = new DatabaseSync(db, { readOnly: true });
  try {
    return (d.prepare(query).all() as { origin: string; seq: number }[]).map((r) => `${r.origin} ${r.seq}`);
  } finally {
    d.close();
  }
}

/**
 * Waits until nothing more can reach the collectors: every worker idle (no job running or queued, by
 * its own status), then each collector holding a body for every row of every worker's sample log. A
 * job abandoned on a hung or cut-off worker can still finish there after its campaign ended and claim
 * its sample a second time; two collectors compared before that claim reached both are compared at
 * two different moments (an export holding the claim counts one more redundant claim).
 */
async function settled(f: Fleet): Promise<void> {
  await poll(
    async () => {
      const busy: number[] = [];
      for (const h of WORKERS) {
        const self = (await drill.status(f, h)).nodes.find((n) => n.self);
        if (!self || self.load.running > 0 || self.load.queued > 0) busy.push(h);
      }
      return busy.length === 0 ? true : notYet({ busy });
    },
    120_000,
    'every worker idle',
  );
  const rows = WORKERS.flatMap((h) =>
    rowsOf(
      join(f.dirs[h]!, SAMPLE_LOG_DB),
      `SELECT '${f.peers[h]!}' AS origin, seq FROM samples ORDER BY seq`,
    ),
  );
  for (const h of COLLECTORS)
    await poll(
      async () => {
        const held = new Set(
          rowsOf(
            join(f.datasets.get(h)!, DATASET_DB),
            "SELECT origin, seq FROM samples WHERE body_state = 'ok'",
          ),
        );
        const lack = rows.filter((r) => !held.has(r));
        return lack.length === 0 ? true : notYet({ lack: lack.slice(0, 5), of: lack.length });
      },
      120_000,
      `the collector on host ${h} to hold every row of the workers' sample logs`,
    );
}

/** Stops both collectors (SIGTERM, exit 0) and exports each as hf; the two exports must be byte-identical. */
async function exportBoth(f: Fleet): Promise<Record<string, string>> {
  const exports: Record<string, string>[] = [];
  for (const h of COLLECTORS) {
    const p = f.procs[h]!;
    p.child.kill('SIGTERM');
    expect(await p.exited, p.output().slice(-2000)).toBe(0);
    const out = join(f.dirs[h]!, 'export-hf');
    const r = await vtnode(['export', '--from', f.datasets.get(h)!, '--format', 'hf', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    exports.push(await filesOf(out));
  }
  // File by file: a difference shows as a diff of that file's text.
  expect(Object.keys(exports[1]!).sort()).toEqual(Object.keys(exports[0]!).sort());
  for (const [path, text] of Object.entries(exports[0]!))
    expect(exports[1]![path], `${path} of the second collector's export`).toBe(text);
  return exports[0]!;
}

function expectComplete(code: number | null, json: RunJson, tasks: Task[], output: string): void {
  expect(code, output.slice(-3000)).toBe(0);
  expect(json.status).toBe('done');
  const n = tasks.length * K;
  expect(json.samples).toMatchObject({ planned: n, generated: n, scored: n });
  expect(json.tasks.map((t) => t.samples)).toEqual(tasks.map(() => K));
}

/** The first of `hosts` whose model server has a request in flight (a job running there). */
/** A host of `hosts` whose model server has requests in flight, and the stats that showed it. */
async function busyHostStats(
  hosts: number[],
  run: { child: { exitCode: number | null } },
  what: string,
): Promise<{ host: number; stats: Awaited<ReturnType<typeof drill.emulatorStats>> }> {
  return poll(
    async () => {
      if (run.child.exitCode !== null) throw new Error(`the campaign ended before ${what}`);
      for (const host of hosts) {
        const stats = await drill.emulatorStats(host).catch(() => null);
        if (stats && stats.requests > stats.completed) return { host, stats };
      }
      return null;
    },
    90_000,
    what,
    250,
  );
}

async function busyHost(hosts: number[], run: { child: { exitCode: number | null } }, what: string) {
  return (await busyHostStats(hosts, run, what)).host;
}

const reference = {
  /** Sample id → "content reward". */
  content: new Map<string, string>(),
  export: {} as Record<string, string>,
};

/**
 * The sample ids a campaign of `tasks` plans (sample ids are deterministic from task, model, index and
 * the sample's seed, the campaign's seed base + index): what the collectors must hold before anything
 * is read from them. Never derived from what a collector holds at some instant, which may still lack
 * a body in flight.
 */
function plannedIds(tasks: Task[]): Set<string> {
  return new Set(
    tasks.flatMap((t) =>
      Array.from({ length: K }, (_, i) => sampleId(t.id, MODEL, i, sampleSeed(CAMPAIGN_SEED, i))),
    ),
  );
}
let fleet: Fleet;

describe.skipIf(!enabled)('fault drills across six hosts (network namespaces)', () => {
  it(
    'a fault-free reference run: every sample once, both collectors identical',
    () =>
      step('reference', async () => {
        const f = await drill.startFleet('ref');
        const t = Date.now();
        try {
          const run = drill.runCampaign(f, files.all, 'ref', K);
          const { code, json } = await campaignResult(run, 240_000);
          expectComplete(code, json, [...tasksA, ...tasksB], run.output());
          log(
            `reference campaign done in ${((Date.now() - t) / 1000).toFixed(0)} s: ${json.samples.scored} samples`,
          );
          // Both collectors hold every planned sample (bodies fetched, nothing pending) before the
          // reference is read: the campaign is done when the workers have scored, not when the last
          // body reached the collectors.
          const planned = plannedIds([...tasksA, ...tasksB]);
          await collectorsHold(f, planned, `the reference's ${planned.size} samples`);
          reference.content = contentById(datasetSamples(f.datasets.get(COLLECTORS[0])!));
          expect([...reference.content.keys()].sort()).toEqual([...planned].sort());
          expect(contentById(datasetSamples(f.datasets.get(COLLECTORS[1])!))).toEqual(reference.content);
          reference.export = await exportBoth(f);
        } finally {
          await drill.stopFleet(f);
        }
        log(
          `reference: ${reference.content.size} samples, ${JSON.parse(reference.export['manifest.json']!).counts.rows} exported rows`,
        );
      }),
    420_000,
  );

  it(
    'net: a worker cut off for 30 s and one SIGSTOPped for 60 s mid-job, a collector killed -9 and restarted',
    () =>
      step('net', async () => {
        fleet = await drill.startFleet('drill');
        const f = fleet;
        const run = drill.runCampaign(f, files.a, 'net', K);
        // The partition: a worker host (not the submitter's) with a job running, cut off the bridge.
        const cut = await busyHost([1, 2, 3], run, 'a busy worker to cut off');
        await net!.setLinkUp(cut, false);
        const cutAt = Date.now();
        const atCut = await drill.emulatorStats(cut);
        log(`net: host ${cut} cut off with ${atCut.requests - atCut.completed} requests in flight`);
        // The stop: another busy worker's node frozen.
        const stopped = await busyHost(
          [1, 2, 3].filter((h) => h !== cut),
          run,
          'another busy worker to stop',
        );
        f.procs[stopped]!.child.kill('SIGSTOP');
        const stoppedAt = Date.now();
        log(`net: host ${stopped}'s node SIGSTOPped`);
        // The collector: killed with -9 once it holds something.
        const c = COLLECTORS[0];
        await poll(
          async () => ((await collectorStatus(f.dirs[c]!))?.stats.bodies ?? 0) > 0,
          60_000,
          'a body at collector 4',
          250,
        );
        f.procs[c]!.child.kill('SIGKILL');
        expect(await f.procs[c]!.exited).toBeNull();
        const killedWith = f.procs[c]!.child.signalCode;
        log(`net: collector host ${c} killed (${killedWith})`);

        await sleep(cutAt + PARTITION_MS - Date.now());
        const beforeHeal = await drill.emulatorStats(cut);
        await net!.setLinkUp(cut, true);
        log(
          `net: host ${cut} reconnected; it completed ${beforeHeal.completed - atCut.completed} requests while cut off`,
        );
        f.procs[c] = drill.spawnCollector(f.dirs[c]!, f.datasets.get(c)!, c);
        log(`net: collector host ${c} restarted on its data dir`);
        await sleep(stoppedAt + STOP_MS - Date.now());
        f.procs[stopped]!.child.kill('SIGCONT');
        log(`net: host ${stopped}'s node SIGCONTinued`);

        const { code, json } = await campaignResult(run, 300_000);
        expectComplete(code, json, tasksA, run.output());
        log(
          `net: campaign done (${json.samples.scored} samples; by node: ${json.nodes.map((n) => `${n.peerId.slice(-6)}=${n.scored}`).join(' ')})`,
        );
        expect(killedWith).toBe('SIGKILL');
        // The cut-off worker went on with its job meanwhile; the stopped one lived through it.
        expect(beforeHeal.completed).toBeGreaterThan(atCut.completed);
        expect(f.procs[stopped]!.child.exitCode).toBeNull();
        // Both collectors, the restarted one too, hold every sample of the campaign.
        const wantA = plannedIds(tasksA);
        await collectorsHold(f, wantA, `campaign net's ${wantA.size} samples`);
        log('net: both collectors hold every sample of the campaign');
      }),
    420_000,
  );

  it(
    'models: a model server killed, one SIGSTOPped (hangs), one answering garbage, each mid-job',
    () =>
      step('models', async () => {
        const f = fleet;
        // The default --job-timeout (30 min): a hung server's jobs must fail because its node finds it
        // down, not because the submitter gives up on them.
        const run = drill.runCampaign(f, files.b, 'models', K);
        const faults: Record<string, (h: number) => Promise<void>> = {
          dies: async (h) => {
            drill.modelServers.get(h)!.child.kill('SIGKILL');
            await drill.modelServers.get(h)!.exited;
          },
          hangs: async (h) => {
            drill.modelServers.get(h)!.child.kill('SIGSTOP');
          },
          // Chat answers that are no chat completion (HTTP 200), while its probes still answer.
          garbage: (h) => drill.setEmulatorFaults(h, { garbageRate: 1 }),
        };
        const applied = new Map<string, { host: number; inFlight: number; requests: number }>();
        const free = [1, 2, 3];
        for (const [fault, apply] of Object.entries(faults)) {
          // The fault follows the sample that found requests in flight at once (a second sample could
          // find that request just answered, though the job goes on).
          const { host: h, stats: s } = await busyHostStats(
            free,
            run,
            `a busy worker whose model server ${fault}`,
          );
          await apply(h);
          free.splice(free.indexOf(h), 1);
          applied.set(fault, { host: h, inFlight: s.requests - s.completed, requests: s.requests });
          log(`models: host ${h}'s model server ${fault} (${s.requests - s.completed} requests in flight)`);
        }
        const { code, json } = await campaignResult(run, 300_000);
        expectComplete(code, json, tasksB, run.output());
        log(
          `models: campaign done (${json.samples.scored} samples; by node: ${json.nodes.map((n) => `${n.peerId.slice(-6)}=${n.scored}`).join(' ')})`,
        );
        for (const [fault, a] of applied) expect(a.inFlight, fault).toBeGreaterThan(0);
        const garbageHost = applied.get('garbage')!.host;
        const garbage = (await drill.emulatorStats(garbageHost)).faults.garbage;
        log(`models: host ${garbageHost}'s model server answered ${garbage} chat requests with garbage`);
        expect(garbage).toBeGreaterThan(0);
        drill.modelServers.get(applied.get('hangs')!.host)!.child.kill('SIGCONT');
        await collectorsHold(f, plannedIds(tasksB), `campaign models' ${tasksB.length * K} samples`);
        log('models: both collectors hold every sample of the campaign');
      }),
    420_000,
  );

  it(
    'the drilled dataset equals the reference: same samples, none lost or doubled; collectors identical',
    () =>
      step('final', async () => {
        const f = fleet;
        const want = plannedIds([...tasksA, ...tasksB]);
        await collectorsHold(f, want, 'every reference sample');
        await settled(f);
        const statuses = await Promise.all(COLLECTORS.map((h) => collectorStatus(f.dirs[h]!)));
        await poll(
          async () => {
            const [a, b] = await Promise.all(COLLECTORS.map((h) => collectorStatus(f.dirs[h]!)));
            return a && b && a.contentDigest === b.contentDigest;
          },
          60_000,
          'the collectors content digests to agree',
          2000,
        );
        for (const h of COLLECTORS) {
          const held = contentById(datasetSamples(f.datasets.get(h)!));
          const lost = [...want].filter((id) => !held.has(id));
          const extra = [...held.keys()].filter((id) => !want.has(id));
          log(
            `collector host ${h}: ${held.size} samples, ${lost.length} lost, ${extra.length} not in the reference`,
          );
          expect(held).toEqual(reference.content);
        }
        const drilled = await exportBoth(f);
        // The rows (and card) are the reference's byte for byte; the manifests differ only in the
        // dataset digest, which covers origins and sequence numbers (other peers in this fleet), and
        // in how many redundant claims were left out: a job backed up or re-placed whose two nodes
        // both finished a sample claims it twice (counted in the manifest, exported once).
        for (const [path, text] of Object.entries(reference.export)) {
          if (path === 'manifest.json') continue;
          expect(drilled[path], path).toBe(text);
        }
        const manifest = (m: string) => {
          const j = JSON.parse(m);
          const { 'same-sample-other-origin': redundant, ...excluded } = j.counts.excluded;
          return {
            body: { ...j, dataset: null, counts: { ...j.counts, excluded } },
            redundant: redundant as number,
          };
        };
        const drilledManifest = manifest(drilled['manifest.json']!);
        expect(drilledManifest.body).toEqual(manifest(reference.export['manifest.json']!).body);
        log(`drilled export: ${drilledManifest.redundant} redundant claims of a sample left out`);
        const rows = Object.entries(drilled)
          .filter(([p]) => p.endsWith('.jsonl'))
          .flatMap(([, t]) =>
            t
              .split('\n')
              .filter(Boolean)
              .map((l) => JSON.parse(l).sample_id as string),
          );
        expect(new Set(rows).size).toBe(rows.length);
        log(
          `drilled export: ${rows.length} rows, identical at both collectors (${statuses[0]?.contentDigest.slice(0, 19)}…)`,
        );
      }),
    240_000,
  );
});
