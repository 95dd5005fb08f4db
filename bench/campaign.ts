// End-to-end: a campaign through the mesh against calling the model server directly with the same
// schedule (warm then fan out, the same number of jobs at once), in one run.
//   npx node bench/campaign.ts [--tasks 24] [-k 4] [--rounds 3] [--jobs 2] [--score]
// By default the emulated server's answers are all cut at max tokens (finish_reason length), which
// score 0 without a sandbox run: the ratio is the cost of the mesh (placement, job streams, the
// durable sample log, the campaign store), not of scoring. With --score the answers are a mix of
// right and wrong code, every one scored in the real sandbox, and the direct schedule scores each
// sample as it is generated (two at once, as a worker does): production's shape, where a job ends
// seconds after its last sample is generated.
// The first campaign pays the worker's probation (one job at a time until its first scored sample);
// then `--rounds` rounds each run the direct schedule and a campaign back to back, and the median of
// their ratios is reported (this machine's load moves between runs; a pair within a round shares it).
// The CLI's own share (process start, the request, the summary) is reported apart, from the
// daemon's campaignSeconds.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { limiter } from '../node/async/semaphore.ts';
import { createEmulator } from '../node/model-server/emulator.ts';
import { createModelAdapter, type Sample } from '../node/models/adapter.ts';
import { candidateOf, unscorableReason } from '../node/worker/job-samples.ts';
import { workspaceId } from '../node/workspace/content-id.ts';
import { sampleSeed } from '../protocol/job.ts';
import type { Task } from '../protocol/task.ts';
import { createScoringCache } from '../sandbox/cache.ts';
import { createCheckedScorer, type Scorer } from '../sandbox/scorer.ts';
import { LEDGER, MODEL, mineLedger, writeTasks } from '../test/helpers/campaign.ts';
import { eventually, Sandbox, vtnode } from '../test/helpers/cli.ts';
import { initFleet, joinNode, peerIdOf, startNode, status, waitForPeers } from '../test/helpers/fleet.ts';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string' },
    k: { type: 'string', short: 'k', default: '4' },
    rounds: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '2' },
    score: { type: 'boolean', default: false },
  },
});
const scoring = values.score;
const taskCount = Number(values.tasks ?? (scoring ? 12 : 24));
const k = Number(values.k);
const rounds = Number(values.rounds);
/** Jobs at once, in both schedules: the worker's --max-jobs. */
const JOBS = Number(values.jobs);
/** Samples scored at once in the direct schedule: the executor's default maxScoring. */
const SCORING_SLOTS = 2;

type Emulator = Awaited<ReturnType<typeof createEmulator>>;
type Stats = ReturnType<Emulator['stats']>;

/** The direct schedule: JOBS tasks at a time through one adapter, each sample scored as it arrives. */
async function direct(server: Emulator, tasks: Task[], scorer: Scorer | null, seedBase: number) {
  server.reset();
  const adapter = createModelAdapter({ url: server.url, behaviour: 'llama-server', concurrency: 4 });
  const slot = limiter(SCORING_SLOTS);
  const started = performance.now();
  const queue = [...tasks];
  await Promise.all(
    Array.from({ length: JOBS }, async () => {
      for (let task = queue.shift(); task; task = queue.shift())
        await directJob(adapter, task, scorer, slot, seedBase);
    }),
  );
  return { ms: performance.now() - started, stats: server.stats() };
}

/** One job of the direct schedule: generate the task's k samples, score each (unless unscorable), wait for all. */
async function directJob(
  adapter: ReturnType<typeof createModelAdapter>,
  task: Task,
  scorer: Scorer | null,
  slot: ReturnType<typeof limiter>,
  seedBase: number,
): Promise<void> {
  const scorings: Promise<unknown>[] = [];
  for await (const sample of adapter.generate({
    model: MODEL,
    messages: task.messages,
    k,
    seeds: Array.from({ length: k }, (_, i) => sampleSeed(seedBase, i)),
    sampling: { maxTokens: scoring ? 2048 : 256 },
  })) {
    if (!sample.ok) throw new Error(sample.error.message);
    if (scorer && !unscorableReason(sample as Sample))
      scorings.push(
        slot(() => scorer.score({ task, workspaceDir: LEDGER, candidate: candidateOf(sample as Sample) })),
      );
  }
  await Promise.all(scorings);
}

/** A fleet of two nodes: a submitter without a model server, and one worker with JOBS slots. */
async function startFleet(box: Sandbox, server: Emulator): Promise<string> {
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
  await waitForPeers(submitter, [await peerIdOf(submitter), await peerIdOf(worker.dataDir)]);
  await eventually(
    async () => (await status(submitter)).nodes.some((n) => n.models.length > 0 && n.sandbox.ok),
    60_000,
    'the worker to be ready',
  );
  return submitter;
}

/**
 * One campaign through `vtnode run` on the submitter, the model server's cache and counters reset
 * first; on the seeds of the direct run it is compared with, so both get the same answers to score.
 */
async function campaign(server: Emulator, submitter: string, file: string, name: string, seedBase: number) {
  server.reset();
  const started = performance.now();
  const args = ['run', '--data-dir', submitter, '--tasks', file, '--campaign', name, '--model', MODEL];
  args.push('--seed', String(seedBase));
  const maxTokens = scoring ? '2048' : '256';
  const res = await vtnode(
    [...args, '-k', String(k), '--split', 'all', '--max-tokens', maxTokens, '--json'],
    {
      timeoutMs: 900_000,
    },
  );
  if (res.code !== 0) throw new Error(res.stderr);
  const json = JSON.parse(res.stdout);
  return {
    ms: performance.now() - started,
    daemonMs: json.campaignSeconds * 1000,
    json,
    stats: server.stats(),
  };
}

/** The scorer of the direct schedule: the worker's, with its own reference cache. */
async function directScorer(dir: string): Promise<Scorer> {
  const cache = join(dir, 'direct-cache');
  await mkdir(cache, { recursive: true });
  return createCheckedScorer({
    workspaceId,
    cache: { references: createScoringCache({ dir: cache }).references },
  });
}

/** The seed base of round `round` (0: the first pair): fresh seeds each round, the same in both schedules. */
const seedOf = (round: number) => 1000 * (round + 1);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const requests = (s: Stats) => `${s.completed} requests, cache hits ${s.cacheHits}`;

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
  script: scoring ? 'mixed' : 'truncate',
});

try {
  const tasks = Array.from({ length: taskCount }, (_, i) => mined.tasks[i % mined.tasks.length]!).filter(
    (t, i, all) => all.findIndex((x) => x.id === t.id) === i,
  );
  const file = await writeTasks(`${dir}/tasks.jsonl`, tasks);
  const scorer = scoring ? await directScorer(dir) : null;
  const submitter = await startFleet(box, server);
  console.log(
    `${tasks.length} tasks × k=${k}, ${JOBS} jobs at once, emulated llama-server (4 slots, time scale 0.05), ` +
      (scoring
        ? `mixed answers scored in the sandbox (${SCORING_SLOTS} at once)`
        : 'answers cut at max tokens (no sandbox run)'),
  );

  // The first pair: the worker on probation, both schedules with cold reference caches.
  const d0 = await direct(server, tasks, scorer, seedOf(0));
  const first = await campaign(server, submitter, file, 'first', seedOf(0));
  console.log(`direct (adapter, same schedule): ${d0.ms.toFixed(0)} ms, ${requests(d0.stats)}`);
  console.log(
    `first campaign (vtnode run): ${first.ms.toFixed(0)} ms, ${requests(first.stats)}, ${first.json.samples.scored} samples scored, ` +
      `${first.json.samples.verified} verified; the daemon's campaign ${first.daemonMs.toFixed(0)} ms, the CLI ${(first.ms - first.daemonMs).toFixed(0)} ms`,
  );
  console.log(
    `first campaign: daemon ÷ direct ${(first.daemonMs / d0.ms).toFixed(2)}, vtnode run ÷ direct ${(first.ms / d0.ms).toFixed(2)}`,
  );

  // Then rounds on fresh seeds, the worker proven: direct and a campaign back to back.
  const ratios: number[] = [];
  const withCli: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const d = await direct(server, tasks, scorer, seedOf(round));
    const c = await campaign(server, submitter, file, `round-${round}`, seedOf(round));
    ratios.push(c.daemonMs / d.ms);
    withCli.push(c.ms / d.ms);
    console.log(
      `round ${round}: direct ${d.ms.toFixed(0)} ms (${requests(d.stats)}), daemon's campaign ${c.daemonMs.toFixed(0)} ms ` +
        `(${requests(c.stats)}, ${c.json.samples.scored} scored): ÷ ${ratios.at(-1)!.toFixed(2)}`,
    );
  }
  if (rounds > 0) {
    console.log(
      `daemon's campaign ÷ direct, median of ${rounds} rounds: ${median(ratios).toFixed(2)} ` +
        `(${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}); with the CLI's start ${median(withCli).toFixed(2)}`,
    );
  }
  await scorer?.close();
} finally {
  await box.cleanup();
  await server.close();
}
