// Sandbox benchmark: median seconds per candidate on the fixture corpus (test/fixtures/sandbox),
// confined (bwrap) vs unconfined, with and without the strict type-check, jobs 1 and 2.
// Run: npx node bench/sandbox.ts [--rounds N]
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { workspaceIdentity } from '../node/workspace/content-id.ts';
import type { Task } from '../protocol/task.ts';
import { createConfinement } from '../sandbox/backend.ts';
import { DEFAULT_LIMITS } from '../sandbox/limits.ts';
import { createScorer, type Scorer } from '../sandbox/scorer.ts';
import { fixtureTasks, prepareFixtures } from '../test/sandbox/fixtures.ts';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, 'uid-base': { type: 'string' } },
});
const rounds = Number(values.rounds);
const uidBase = values['uid-base'] !== undefined ? { uidBase: Number(values['uid-base']) } : {};

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

interface Sample {
  durations: number[];
  wall: number;
  rewards: number;
}

/** Warms the reference inventories (and baselines): they are per task, not per candidate. */
async function warm(scorer: Scorer, tasks: Task[]): Promise<void> {
  for (const t of tasks)
    await scorer.score({ task: t, workspaceDir: t.workspace.root!, candidate: references.get(t.id)! });
}

/** One round: every task once, `jobs` at a time. */
async function round(scorer: Scorer, tasks: Task[], jobs: number, into: Sample): Promise<void> {
  const queue = [...tasks];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: jobs }, async () => {
      for (let t = queue.shift(); t; t = queue.shift()) {
        const t0 = performance.now();
        // A comment makes it a new candidate (no cached reference run) without changing its reward.
        const r = await scorer.score({
          task: t,
          workspaceDir: t.workspace.root!,
          candidate: `${references.get(t.id)!}\n// candidate ${into.durations.length}\n`,
        });
        into.durations.push((performance.now() - t0) / 1000);
        into.rewards += r.reward ?? 0;
      }
    }),
  );
  into.wall += (performance.now() - started) / 1000;
}

/** Spawn cost of the sandbox alone: `bwrap … /bin/true` vs `/bin/true`, median of n. */
async function startupCost(n: number): Promise<{ bare: number; confined: number }> {
  const limits = { ...DEFAULT_LIMITS, wallMs: 10_000 };
  const box = await mkdtemp(join(tmpdir(), 'vtnode-bench-box-'));
  try {
    const result: Record<string, number> = {};
    for (const unconfined of [true, false]) {
      const c = await createConfinement({ unconfined, ...uidBase });
      const times: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await c.run({
          argv: ['/bin/true'],
          cwd: box,
          box,
          readOnlyPaths: [],
          env: { PATH: '/usr/bin:/bin' },
          limits,
        });
        times.push((performance.now() - t0) / 1000);
      }
      result[unconfined ? 'bare' : 'confined'] = median(times);
    }
    return { bare: result['bare']!, confined: result['confined']! };
  } finally {
    await rm(box, { recursive: true, force: true });
  }
}

const spawn = await startupCost(20);
process.stdout.write(
  `spawn only (/bin/true, median of 20): unconfined ${(spawn.bare * 1000).toFixed(0)} ms, bwrap ${(spawn.confined * 1000).toFixed(0)} ms\n`,
);
for (const typecheck of [false, true]) {
  const tasks = typecheck ? corpus : corpus.map((t) => ({ ...t, judge: { ...t.judge, typecheck: null } }));
  for (const jobs of [1, 2]) {
    const scorers = {
      unconfined: createScorer({ confinement: await createConfinement({ unconfined: true }), workspaceId }),
      bwrap: createScorer({ confinement: await createConfinement({ ...uidBase }), workspaceId }),
    };
    const samples: Record<'unconfined' | 'bwrap', Sample> = {
      unconfined: { durations: [], wall: 0, rewards: 0 },
      bwrap: { durations: [], wall: 0, rewards: 0 },
    };
    await warm(scorers.unconfined, tasks);
    await warm(scorers.bwrap, tasks);
    // Rounds alternate between the two so that load from elsewhere hits both alike.
    for (let r = 0; r < rounds; r++)
      for (const name of r % 2 ? (['bwrap', 'unconfined'] as const) : (['unconfined', 'bwrap'] as const))
        await round(scorers[name], tasks, jobs, samples[name]);
    const base = median(samples.unconfined.durations);
    for (const name of ['unconfined', 'bwrap'] as const) {
      const m = samples[name];
      const med = median(m.durations);
      const label = `${name.padEnd(10)} type-check ${typecheck ? 'on ' : 'off'} jobs ${jobs}`;
      const ratio = name === 'bwrap' ? `  ratio ×${(med / base).toFixed(2)}` : '';
      process.stdout.write(
        `${label}: median ${med.toFixed(2)} s/candidate, effective ${(m.wall / m.durations.length).toFixed(2)} s/candidate, mean reward ${(m.rewards / m.durations.length).toFixed(3)}${ratio}\n`,
      );
    }
  }
}
process.stdout.write(
  `\n${rounds} rounds × ${corpus.length} tasks per row; node ${process.version}, ${process.platform}\n`,
);
