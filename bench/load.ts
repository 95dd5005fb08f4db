// Load drill (issue 11, Build 7): a campaign of N samples (default 20,000) through 5 nodes and 2 collectors, with
// emulated model servers and a fast scoring script instead of the sandbox (helpers/fast-scoring-node.ts),
// so the mesh itself is measured: placement, sample logs, digest gossip, catch-up and body fetches.
// Checks completion and that both collectors hold exactly the N distinct samples; prints peak RSS per
// process and each collector's lag from a sample's scoring to its body stored there (p50/p99) as JSON.
//   node bench/load.ts [--k 200]   (25 tasks x 4 models x k samples)

import { strict as assert } from 'node:assert';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createEmulator } from '../node/model-server/emulator.ts';
import { LEDGER, mineLedger, writeTasks } from '../test/helpers/campaign.ts';
import { eventually, type Proc, Sandbox, vtnode } from '../test/helpers/cli.ts';
import { collectorStatus } from '../test/helpers/collect.ts';
import { INTERVAL, initFleet, peerIdOf, status, waitForPeers } from '../test/helpers/fleet.ts';
import { collectorArgs, datasetIds, readyWorkers } from '../test/helpers/load-fleet.ts';
import { notYet } from '../test/helpers/poll.ts';

const NODE = join(import.meta.dirname, '..', 'test', 'helpers', 'fast-scoring-node.ts');
const TASKS = 25;
const MODELS = ['coder-a', 'coder-b', 'coder-c', 'coder-d'];
const { values } = parseArgs({ options: { k: { type: 'string', default: '200' } } });
const K = Number(values.k);
const TOTAL = TASKS * MODELS.length * K;

const box = new Sandbox();
const closers: (() => Promise<void>)[] = [];

/** Peak resident set of a live process, MiB (VmHWM). */
async function peakRssMiB(proc: Proc): Promise<number> {
  const text = await readFile(`/proc/${proc.child.pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(text)![1]) / 1024;
}

async function main(): Promise<void> {
  {
    const dir = await box.tempDir('vt-load-');
    const tasks = (await mineLedger(dir)).tasks.slice(0, TASKS);
    assert.equal(tasks.length, TASKS);
    const file = await writeTasks(join(dir, 'tasks.jsonl'), tasks);

    const nodeArgs: string[][] = [];
    for (let i = 0; i < 5; i++) {
      const s = await createEmulator({
        emulate: 'llama-server',
        models: MODELS,
        tasks,
        timeScale: 0.001,
        concurrency: 8,
        cachePrompts: 64,
        script: 'mixed',
      });
      closers.push(() => s.close());
      nodeArgs.push(['--model-server', s.url, '--workspace', LEDGER, '--max-jobs', '4']);
    }
    const { dataDir: d0, token } = await initFleet(box, 'load', nodeArgs[0]);
    const procs: Record<string, Proc> = { node0: box.spawn(['start', '--data-dir', d0], {}, [], NODE) };
    const dirs = [d0];
    for (let i = 1; i < 5; i++) {
      const d = await box.tempDir('vt-load-node-');
      const args = ['join', token, '--data-dir', d, '--listen', '/ip4/127.0.0.1/tcp/0'];
      procs[`node${i}`] = box.spawn([...args, '--advert-interval', INTERVAL, ...nodeArgs[i]!], {}, [], NODE);
      dirs.push(d);
    }
    const datasets: string[] = [];
    const collectorDirs: string[] = [];
    for (let i = 0; i < 2; i++) {
      const d = await box.tempDir('vt-load-collector-');
      const out = join(d, 'dataset');
      procs[`collector${i}`] = box.spawn(
        collectorArgs({ dataDir: d, token, out, tasksFile: file, listen: '/ip4/127.0.0.1/tcp/0' }),
      );
      datasets.push(out);
      collectorDirs.push(d);
    }
    // One at a time: seven status pollers at once would starve the nodes they wait for on 2 cores.
    const peers = await (async () => {
      const out: string[] = [];
      for (const d of [...dirs, ...collectorDirs]) out.push(await peerIdOf(d));
      return out;
    })().catch((err: Error) => {
      const out = Object.entries(procs).map(
        ([k, p]) =>
          `--- ${k} (exit ${p.child.exitCode}, pid ${p.child.pid}, ${p.child.spawnargs.join(' ').slice(0, 200)})\n${p.output().slice(-1500)}`,
      );
      throw new Error(`${err.message}\n${out.join('\n')}`);
    });
    await waitForPeers(d0, peers, 60_000);
    const workers = new Set(peers.slice(0, 5));
    await eventually(
      async () => readyWorkers(await status(d0), workers, MODELS.length) === 5,
      120_000,
      'five ready workers',
    );

    const started = Date.now();
    const models = MODELS.flatMap((m) => ['--model', m]);
    const args = ['--tasks', file, ...models, '--split', 'all', '-k', String(K), '--campaign', 'load'];
    const res = await vtnode(['run', '--data-dir', d0, ...args, '--json'], { timeoutMs: 3_600_000 });
    const campaignMs = Date.now() - started;
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual((({ planned, scored }) => ({ planned, scored }))(JSON.parse(res.stdout).samples), {
      planned: TOTAL,
      scored: TOTAL,
    });

    for (const d of collectorDirs)
      await eventually(
        async () => {
          const s = await collectorStatus(d);
          return s && s.stats.samples === TOTAL && s.stats.pending === 0 ? s : null;
        },
        600_000,
        `collector ${d} to hold ${TOTAL} bodies`,
      );
    const rss = Object.fromEntries(
      await Promise.all(Object.entries(procs).map(async ([k, p]) => [k, await peakRssMiB(p)] as const)),
    );
    const ids = datasets.map(datasetIds);
    assert.equal(ids[0]!.length, TOTAL);
    assert.deepEqual(ids[1], ids[0]);
    // Both snapshots awaited until they agree (each collector writes its own, on its own time; a late
    // second claim of a backed-up job reaches one before the other); a timeout shows both.
    const [c0, c1] = await eventually(
      async () => {
        const both = await Promise.all(collectorDirs.map(collectorStatus));
        const agree = both[0] && both[1] && both[0].contentDigest === both[1].contentDigest;
        return agree ? both : notYet(both.map((c) => c && { content: c.contentDigest, stats: c.stats }));
      },
      60_000,
      'both collectors to hold the same content',
    );
    // Each collector measures every body's lag, from its scoring at the origin to its storing here.
    const lag = (s: typeof c0) => ({ p50: s!.stats.lagP50Ms, p99: s!.stats.lagP99Ms });

    const figures = {
      samples: TOTAL,
      nodes: 5,
      collectors: 2,
      campaignSeconds: Math.round(campaignMs / 1000),
      samplesPerSecond: Math.round(TOTAL / (campaignMs / 1000)),
      peakRssMiB: Object.fromEntries(Object.entries(rss).map(([k, v]) => [k, Math.round(v)])),
      lagMs: { collector0: lag(c0), collector1: lag(c1) },
      distinctInBothDatasets: ids[0]!.length,
    };
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
  }
}

const cleanup = async () => {
  await box.cleanup();
  await Promise.all(closers.map((c) => c()));
};
// Stopped from outside (a test's time limit, Ctrl-C): the fleet's processes go too.
for (const signal of ['SIGTERM', 'SIGINT'] as const)
  process.once(signal, () => void cleanup().finally(() => process.exit(1)));

try {
  await main();
} finally {
  await cleanup();
}
