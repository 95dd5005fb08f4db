// Sandbox benchmark: median seconds per candidate on the fixture corpus (test/fixtures/sandbox),
// confined (bwrap) vs unconfined, with and without the strict type-check, jobs 1 and 2.
// Run: npx node bench/sandbox.ts [--rounds N]
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { workspaceIdentity } from '../node/workspace/content-id.ts';
import type { Task } from '../protocol/task.ts';
import { createConfinement } from '../sandbox/backend.ts';
import { createScorer, type Scorer } from '../sandbox/scorer.ts';
import { fixtureTasks, prepareFixtures } from '../test/sandbox/fixtures.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' } } });
const rounds = Number(values.rounds);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

await prepareFixtures();
const all = await fixtureTasks();
const corpus = [all['math']!, all['strings']!, all['stack']!, all['stringsTests']!];
const references = new Map<string, string>();
for (const t of corpus) references.set(t.id, await readFile(join(t.workspace.root!, t.target), 'utf8'));
const workspaceId = async (d: string) => (await workspaceIdentity(d)).id;

async function measure(scorer: Scorer, tasks: Task[], jobs: number) {
  // Warm the reference inventories (and baselines) first: they are per task, not per candidate.
  for (const t of tasks)
    await scorer.score({ task: t, workspaceDir: t.workspace.root!, candidate: references.get(t.id)! });
  const queue: Task[] = [];
  for (let r = 0; r < rounds; r++) queue.push(...tasks);
  const durations: number[] = [];
  let rewards = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: jobs }, async () => {
      for (let t = queue.shift(); t; t = queue.shift()) {
        const t0 = performance.now();
        // A comment makes it a new candidate (no cached reference run) without changing its reward.
        const r = await scorer.score({
          task: t,
          workspaceDir: t.workspace.root!,
          candidate: `${references.get(t.id)!}\n// candidate ${durations.length}\n`,
        });
        durations.push((performance.now() - t0) / 1000);
        rewards += r.reward;
      }
    }),
  );
  const wall = (performance.now() - started) / 1000;
  return {
    median: median(durations),
    effective: wall / durations.length,
    meanReward: rewards / durations.length,
  };
}

const rows: string[] = [];
const results = new Map<string, number>();
for (const typecheck of [false, true]) {
  const tasks = typecheck ? corpus : corpus.map((t) => ({ ...t, judge: { ...t.judge, typecheck: null } }));
  for (const jobs of [1, 2]) {
    for (const unconfined of [true, false]) {
      const confinement = await createConfinement({ unconfined });
      const scorer = createScorer({ confinement, workspaceId });
      const m = await measure(scorer, tasks, jobs);
      const key = `${typecheck}/${jobs}/${unconfined}`;
      results.set(key, m.median);
      const label = `${unconfined ? 'unconfined' : 'bwrap'.padEnd(10)} type-check ${typecheck ? 'on ' : 'off'} jobs ${jobs}`;
      const ratio = unconfined
        ? ''
        : `  ratio ×${(m.median / results.get(`${typecheck}/${jobs}/true`)!).toFixed(2)}`;
      const row = `${label}: median ${m.median.toFixed(2)} s/candidate, effective ${m.effective.toFixed(2)} s/candidate, mean reward ${m.meanReward.toFixed(3)}${ratio}`;
      rows.push(row);
      process.stdout.write(`${row}\n`);
    }
  }
}
process.stdout.write(
  `\n${rounds} rounds × ${corpus.length} tasks per row; node ${process.version}, ${process.platform}\n`,
);
