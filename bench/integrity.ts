// The extra cost of the scorer's hardening (issue 9) per candidate: today's scorer against the scorer of
// a checkout from before it (`--old DIR`), on the same tasks and candidates of examples/ledger, in the
// same run. Each scorer runs in a worker process of its own cgroup, so the CPU counted is exact and
// includes every sandboxed run and type-check it starts (bwrap's children never reach a parent's
// rusage). Needs root (cgroups).
//
//   git worktree add /tmp/vt-before c813a31 && ln -s "$PWD/node_modules" /tmp/vt-before/node_modules
//   npx node bench/integrity.ts --old /tmp/vt-before [--tasks 8]
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

/** Worker: scores every candidate with the scorer module given (the parent attaches it to a cgroup at once). */
async function worker(scorerModule: string, tasksFile: string): Promise<void> {
  const { createCheckedScorer } = (await import(scorerModule)) as typeof import('../sandbox/scorer.ts');
  const scorer = await createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
  const tasks = JSON.parse(await readFile(tasksFile, 'utf8')) as Task[];
  const rewards: (number | null)[] = [];
  for (const task of tasks) {
    const reference = await readFile(join(LEDGER, task.target), 'utf8');
    for (const candidate of [reference, wrongOf(reference)])
      rewards.push((await scorer.score({ task, workspaceDir: LEDGER, candidate })).reward);
  }
  process.stdout.write(`${JSON.stringify({ scored: rewards.length, rewards })}\n`);
  // Today's scorer keeps type-check services (a scorer from before them has no close).
  await (scorer as { close?: () => Promise<void> }).close?.();
}

/** Runs one scorer in a worker attached to a fresh cgroup; its exact CPU and the rewards it gave. */
async function measure(scorerModule: string, tasksFile: string) {
  const cgroups = await probeCgroups();
  if (cgroups.kind === 'none') throw new Error(`no usable cgroups (${cgroups.detail}): run as root`);
  const cg = await cgroups.create({ memoryBytes: 16 * 1024 ** 3, processes: 4096 });
  if (!cg) throw new Error(`cannot create a cgroup (${cgroups.detail})`);
  const child = spawn(
    process.execPath,
    [import.meta.filename, '--worker', scorerModule, '--tasks-file', tasksFile],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  // Attached while node is still starting (milliseconds of CPU before the worker loads anything).
  await cg.attach(child.pid!);
  const started = performance.now();
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  const wallS = (performance.now() - started) / 1000;
  const cpuS = (await cg.cpuMs()) / 1000;
  await cg.destroy();
  if (code !== 0) throw new Error(`the worker for ${scorerModule} exited ${code}`);
  return { cpuS, wallS, ...WorkerResult.parse(JSON.parse(out.trim().split('\n').at(-1)!)) };
}

const { values } = parseArgs({
  options: {
    old: { type: 'string' },
    tasks: { type: 'string', default: '8' },
    worker: { type: 'string' },
    'tasks-file': { type: 'string' },
  },
});

if (values.worker) {
  await worker(values.worker, values['tasks-file']!);
} else {
  if (!values.old)
    throw new Error('--old DIR: a checkout of vtnode from before the hardening (see the header)');
  const { tasks } = await mine({ root: LEDGER });
  const n = Number(values.tasks);
  const pick = [
    ...tasks.filter((t) => t.kind === 'file').slice(0, Math.ceil(n / 2)),
    ...tasks.filter((t) => t.kind === 'tests').slice(0, Math.floor(n / 2)),
  ];
  const tasksFile = join(process.env['TMPDIR'] ?? '/tmp', `vtnode-bench-integrity-${process.pid}.json`);
  await (await import('node:fs/promises')).writeFile(tasksFile, JSON.stringify(pick));
  const before = await measure(join(resolve(values.old), 'sandbox', 'scorer.ts'), tasksFile);
  const now = await measure(join(import.meta.dirname, '..', 'sandbox', 'scorer.ts'), tasksFile);
  const per = (r: { cpuS: number; scored: number }) => r.cpuS / r.scored;
  console.log(
    `candidates: ${now.scored} (${pick.length} tasks: ${pick.filter((t) => t.kind === 'file').length} file, ${pick.filter((t) => t.kind === 'tests').length} tests; each the reference and one wrong variant)`,
  );
  console.log('| scorer | CPU s (all) | CPU s / candidate | wall s | rewards |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const [name, r] of [
    ['before (no harness, no quotas, tests by count)', before],
    ['now (harness, quotas, cgroups, tests by mutants)', now],
  ] as const)
    console.log(
      `| ${name} | ${r.cpuS.toFixed(1)} | ${per(r).toFixed(2)} | ${r.wallS.toFixed(0)} | ${r.rewards.map((x) => (x === null ? '-' : x.toFixed(2))).join(' ')} |`,
    );
  console.log(`\nratio now / before, CPU per candidate: ${(per(now) / per(before)).toFixed(2)}`);
}
