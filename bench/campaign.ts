// End-to-end: a campaign through the mesh against calling the model server directly with the same
// schedule (warm then fan out, the same number of jobs at once), in one run.
//   npx node bench/campaign.ts [--tasks 24] [-k 4]
// The emulated server's answers are all cut at max tokens (finish_reason length), which score 0
// without a sandbox run: the ratio is the cost of the mesh (placement, job streams, the durable
// sample log, the campaign store), not of scoring. The CLI's own share (process start, the request,
// the summary) is reported apart, from the daemon's campaignSeconds. A second campaign on the same
// daemon shows the steady state, once the worker is out of probation.
import { parseArgs } from 'node:util';
import { createEmulator } from '../node/model-server/emulator.ts';
import { createModelAdapter } from '../node/models/adapter.ts';
import { sampleSeed } from '../protocol/job.ts';
import { LEDGER, MODEL, mineLedger, writeTasks } from '../test/helpers/campaign.ts';
import { eventually, Sandbox, vtnode } from '../test/helpers/cli.ts';
import { initFleet, joinNode, peerIdOf, startNode, status, waitForPeers } from '../test/helpers/fleet.ts';

const { values } = parseArgs({
  options: { tasks: { type: 'string', default: '24' }, k: { type: 'string', short: 'k', default: '4' } },
});
const taskCount = Number(values.tasks);
const k = Number(values.k);
const JOBS = 2;
const box = new Sandbox();
const dir = await box.tempDir('vt-bench-');
const mined = await mineLedger(dir);
const server = await createEmulator({
  emulate: 'llama-server',
  models: [MODEL],
  tasks: mined.tasks,
  timeScale: 0.05,
  concurrency: 4,
  cachePrompts: 8,
  script: 'truncate',
});

try {
  const tasks = Array.from({ length: taskCount }, (_, i) => mined.tasks[i % mined.tasks.length]!).filter(
    (t, i, all) => all.findIndex((x) => x.id === t.id) === i,
  );
  const file = await writeTasks(`${dir}/tasks.jsonl`, tasks);

  // Direct: the same adapter a worker uses, JOBS tasks at a time.
  server.reset();
  const adapter = createModelAdapter({ url: server.url, behaviour: 'llama-server', concurrency: 4 });
  const t0 = performance.now();
  const queue = [...tasks];
  await Promise.all(
    Array.from({ length: JOBS }, async () => {
      for (let task = queue.shift(); task; task = queue.shift()) {
        for await (const _ of adapter.generate({
          model: MODEL,
          messages: task.messages,
          k,
          seeds: Array.from({ length: k }, (_, i) => sampleSeed(0, i)),
          sampling: { maxTokens: 256 },
        })) {
          // drain
        }
      }
    }),
  );
  const directMs = performance.now() - t0;
  const directStats = server.stats();

  // Through the mesh: a submitter node without a model server and one worker, JOBS slots.
  server.reset();
  const { dataDir: submitter, token } = await initFleet(box, 'bench', [
    '--model-server',
    'http://127.0.0.1:9',
  ]);
  startNode(box, submitter);
  const worker = await joinNode(box, token, [
    '--model-server',
    server.url,
    '--workspace',
    LEDGER,
    '--max-jobs',
    String(JOBS),
  ]);
  const peers = [await peerIdOf(submitter), await peerIdOf(worker.dataDir)];
  await waitForPeers(submitter, peers);
  await eventually(
    async () => (await status(submitter)).nodes.some((n) => n.models.length > 0 && n.sandbox.ok),
    60_000,
    'the worker to be ready',
  );
  /** One campaign through `vtnode run` on the submitter, the model server's cache and counters reset first. */
  const campaign = async (name: string) => {
    server.reset();
    const started = performance.now();
    const args = ['run', '--data-dir', submitter, '--tasks', file, '--campaign', name, '--model', MODEL];
    const res = await vtnode([...args, '-k', String(k), '--split', 'all', '--max-tokens', '256', '--json'], {
      timeoutMs: 600_000,
    });
    if (res.code !== 0) throw new Error(res.stderr);
    return { ms: performance.now() - started, json: JSON.parse(res.stdout), stats: server.stats() };
  };
  // The first campaign pays the worker's probation (one job at a time until it returns a scored
  // sample); the daemon remembers the node as proven, so its next campaign, on fresh seeds, does not.
  const first = await campaign('first');
  const second = await campaign('second');
  const { ms: meshMs, json, stats: meshStats } = first;

  console.log(
    `${tasks.length} tasks × k=${k}, ${JOBS} jobs at once, emulated llama-server (4 slots, time scale 0.05)`,
  );
  console.log(
    `direct (adapter, same schedule): ${directMs.toFixed(0)} ms, ${directStats.completed} requests, cache hits ${directStats.cacheHits}`,
  );
  // The daemon's own time for the campaign (its start to its end); the rest of `vtnode run`'s wall
  // time is the CLI: its process start, the request, and printing the summary.
  const daemonMs = json.campaignSeconds * 1000;
  console.log(
    `through the mesh (vtnode run): ${meshMs.toFixed(0)} ms, ${meshStats.completed} requests, ` +
      `cache hits ${meshStats.cacheHits}, ${json.samples.scored} samples scored`,
  );
  console.log(
    `  of which the daemon's campaign (start to end): ${daemonMs.toFixed(0)} ms; the CLI (process start, request, summary): ${(meshMs - daemonMs).toFixed(0)} ms`,
  );
  console.log(`daemon's campaign ÷ direct: ${(daemonMs / directMs).toFixed(2)}`);
  console.log(`vtnode run ÷ direct (with the CLI's start): ${(meshMs / directMs).toFixed(2)}`);
  const provenMs = second.json.campaignSeconds * 1000;
  console.log(
    `the daemon's second campaign (the worker proven, fresh seeds): ${provenMs.toFixed(0)} ms, ` +
      `${second.stats.completed} requests, cache hits ${second.stats.cacheHits}, ${second.json.samples.scored} samples scored`,
  );
  console.log(`second campaign ÷ direct: ${(provenMs / directMs).toFixed(2)}`);
} finally {
  await box.cleanup();
  await server.close();
}
