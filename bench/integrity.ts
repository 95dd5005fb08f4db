// The extra cost of the scorer's hardening (issues 9 and 24) per task calibrated and per candidate:
// today's scorer, the same with the differential replay off, and (`--old DIR`) the scorer of a checkout
// from before, on the same tasks and candidates of examples/ledger, in the same run. Each scorer runs in a worker process of its own cgroup, so the CPU counted is exact and
// includes every sandboxed run and type-check it starts (bwrap's children never reach a parent's
// rusage). Needs root (cgroups).
//
//   git worktree add /tmp/vt-before c813a31 && ln -s "$PWD/node_modules" /tmp/vt-before/node_modules
//   npx node bench/integrity.ts --old /tmp/vt-before [--tasks 8] [--kind file|tests]
//
// `--kind` takes every task of one kind (`file` tasks measure the differential replay; `tests` tasks the
// mutation run); by default half of each.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { mine } from '../node/tasks/mine.ts';
import { workspaceIdentity } from '../node/workspace/content-id.ts';
import type { Task } from '../protocol/task.ts';
import { probeCgroups } from '../sandbox/cgroup.ts';

const LEDGER = resolve(import.meta.dirname, '..', 'examples', 'ledger');

/** A wrong but plausible candidate: the reference with its first comparison or arithmetic flipped. */
function wrongOf(reference: string): string {
  for (const [a, b] of [
    [' < ', ' <= '],
    [' === ', ' !== '],
    [' + ', ' - '],
    ["toBe('", "toBe('x"],
  ] as const)
    if (reference.includes(a)) return reference.replace(a, b);
  return `${reference}\n// unchanged\n`;
}

const WorkerResult = z.object({ scored: z.number(), rewards: z.array(z.number().nullable()) });
/** The worker's line once every task is calibrated: the parent reads the cgroup's CPU, then says `go`. */
const CALIBRATED = 'calibrated';

/**
 * Worker: calibrates every task (scores its reference), says so and waits for the parent, then scores
 * an honest copy of each reference and one wrong variant (the parent attaches it to a cgroup at once).
 */
async function worker(scorerModule: string, tasksFile: string, replay: boolean): Promise<void> {
  const { createCheckedScorer } = (await import(scorerModule)) as typeof import('../sandbox/scorer.ts');
  const scorer = await createCheckedScorer({
    workspaceId: async (d) => (await workspaceIdentity(d)).id,
    ...(replay ? {} : { replay: false }),
  });
  const tasks = JSON.parse(await readFile(tasksFile, 'utf8')) as Task[];
  const references = await Promise.all(tasks.map((t) => readFile(join(LEDGER, t.target), 'utf8')));
  for (const [i, task] of tasks.entries())
    await scorer.score({ task, workspaceDir: LEDGER, candidate: references[i]! });
  process.stdout.write(`${CALIBRATED}\n`);
  await new Promise((resolve) => process.stdin.once('data', resolve));
  process.stdin.destroy();
  const rewards: (number | null)[] = [];
  for (const [i, task] of tasks.entries()) {
    // The honest copy is not the reference's text: it is judged as any candidate is (the replay too).
    for (const candidate of [`${references[i]}\n// an honest copy\n`, wrongOf(references[i]!)])
      rewards.push((await scorer.score({ task, workspaceDir: LEDGER, candidate })).reward);
  }
  process.stdout.write(`${JSON.stringify({ scored: rewards.length, rewards })}\n`);
  // Today's scorer keeps type-check services (a scorer from before them has no close).
  await (scorer as { close?: () => Promise<void> }).close?.();
}

/** Runs one scorer in a worker attached to a fresh cgroup; its exact CPU and the rewards it gave. */
async function measure(scorerModule: string, tasksFile: string, replay = true) {
  const cgroups = await probeCgroups();
  if (cgroups.kind === 'none') throw new Error(`no usable cgroups (${cgroups.detail}): run as root`);
  const cg = await cgroups.create({ memoryBytes: 16 * 1024 ** 3, processes: 4096 });
  if (!cg) throw new Error(`cannot create a cgroup (${cgroups.detail})`);
  const child = spawn(
    process.execPath,
    [
      import.meta.filename,
      '--worker',
      scorerModule,
      '--tasks-file',
      tasksFile,
      ...(replay ? [] : ['--no-replay']),
    ],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  // Attached while node is still starting (milliseconds of CPU before the worker loads anything).
  await cg.attach(child.pid!);
  const started = performance.now();
  let out = '';
  let calibrationS = Number.NaN;
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (Number.isNaN(calibrationS) && out.includes(`${CALIBRATED}\n`))
      void cg.cpuMs().then((ms) => {
        calibrationS = ms / 1000;
        child.stdin.end('go\n');
      });
  });
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  const wallS = (performance.now() - started) / 1000;
  const cpuS = (await cg.cpuMs()) / 1000;
  await cg.destroy();
  if (code !== 0) throw new Error(`the worker for ${scorerModule} exited ${code}`);
  const result = WorkerResult.parse(JSON.parse(out.trim().split('\n').at(-1)!));
  return { cpuS, calibrationS, candidateS: (cpuS - calibrationS) / result.scored, wallS, ...result };
}

const { values } = parseArgs({
  options: {
    old: { type: 'string' },
    tasks: { type: 'string', default: '8' },
    kind: { type: 'string' },
    worker: { type: 'string' },
    'tasks-file': { type: 'string' },
    'no-replay': { type: 'boolean', default: false },
  },
});

if (values.worker) {
  await worker(values.worker, values['tasks-file']!, !values['no-replay']);
} else {
  const { tasks } = await mine({ root: LEDGER });
  const n = Number(values.tasks);
  const kind = z.enum(['file', 'tests']).optional().parse(values.kind);
  const pick = kind
    ? tasks.filter((t) => t.kind === kind).slice(0, n)
    : [
        ...tasks.filter((t) => t.kind === 'file').slice(0, Math.ceil(n / 2)),
        ...tasks.filter((t) => t.kind === 'tests').slice(0, Math.floor(n / 2)),
      ];
  const tasksFile = join(process.env['TMPDIR'] ?? '/tmp', `vtnode-bench-integrity-${process.pid}.json`);
  await (await import('node:fs/promises')).writeFile(tasksFile, JSON.stringify(pick));
  const scorerNow = join(import.meta.dirname, '..', 'sandbox', 'scorer.ts');
  const rows: [string, Awaited<ReturnType<typeof measure>>][] = [];
  if (values.old)
    rows.push([
      `before (${values.old})`,
      await measure(join(resolve(values.old), 'sandbox', 'scorer.ts'), tasksFile),
    ]);
  const now = await measure(scorerNow, tasksFile);
  // The same scorer with the differential replay off: what the replay alone adds.
  const noReplay = await measure(scorerNow, tasksFile, false);
  rows.push(['now', now], ['now without the differential replay', noReplay]);
  const files = pick.filter((t) => t.kind === 'file').length;
  console.log(
    `${pick.length} tasks (${files} file, ${pick.length - files} tests), each calibrated, then scored with an honest copy of its reference and one wrong variant (${now.scored} candidates)`,
  );
  console.log('| scorer | CPU s (all) | calibration CPU s / task | CPU s / candidate | wall s | rewards |');
  console.log('| --- | ---: | ---: | ---: | ---: | --- |');
  for (const [name, r] of rows)
    console.log(
      `| ${name} | ${r.cpuS.toFixed(1)} | ${(r.calibrationS / pick.length).toFixed(2)} | ${r.candidateS.toFixed(2)} | ${r.wallS.toFixed(0)} | ${r.rewards.map((x) => (x === null ? '-' : x.toFixed(2))).join(' ')} |`,
    );
  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  console.log(
    `\nnow ÷ now without the replay: calibration ${ratio(now.calibrationS, noReplay.calibrationS)}, per candidate ${ratio(now.candidateS, noReplay.candidateS)}`,
  );
  const [, before] = rows[0]!;
  if (values.old)
    console.log(
      `now ÷ before: calibration ${ratio(now.calibrationS, before.calibrationS)}, per candidate ${ratio(now.candidateS, before.candidateS)}`,
    );
}
