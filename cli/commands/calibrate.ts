import { existsSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readTasksFile, type TaskLine } from '../../sandbox/tasks-file.ts';
import { CliError, type Command } from '../command.ts';
import { commandLine, flag, group, int, string } from '../options.ts';
import { openScorer, refuseUnreadyWorkspace } from '../scorer.ts';

const line = commandLine({
  prose: `Usage: vtnode calibrate --tasks FILE --out FILE [options]

Scores every task's reference (the workspace's own target file) in the sandbox and keeps only the
tasks whose reference scores 1.0. Prints the reason for each dropped task, a progress bar on stderr
and a summary. Exits 0 when some tasks were kept; exits 3 when some tasks could not be calibrated for
infrastructure reasons (a box that could not be set up, a run stopped by its wall-clock limit on a
loaded machine): those are neither kept nor dropped, and are listed as unscored (run again). A
workspace that cannot run the tasks (not installed, not built, not the tasks' checkout), or one where
no reference scores 1.0, is refused with exit 1 and nothing written.`,
  groups: [
    group('Options:', {
      tasks: string({ doc: 'tasks.jsonl to calibrate', value: 'FILE', required: true }),
      out: string({
        doc: 'where the kept tasks are written (lines unchanged)',
        value: 'FILE',
        required: true,
      }),
      jobs: int({ doc: 'tasks scored in parallel', min: 1, default: 1 }),
      workspace: string({
        doc: "score every task in this checkout (default: each task's workspace.root)",
        value: 'DIR',
      }),
      unconfined: flag({ doc: 'run without the sandbox (trusted input only)' }),
      json: flag({
        doc: 'print { "kept": n, "dropped": [{ "taskId", "reason" }], "unscored": [{ "taskId", "reason" }], "replay": [{ "taskId", "replayable", "why", "recorded", "kept", "mode" }] }',
      }),
    }),
  ],
});

interface Dropped {
  taskId: string;
  reason: string;
}

/** The differential replay's coverage of one kept file task (sandbox/replay/). */
interface ReplayCoverage {
  taskId: string;
  replayable: boolean;
  why: string | null;
  recorded: number;
  kept: number;
  /** Where its candidates are replayed (the node mode costs a tenth of a vitest run). */
  mode: 'node' | 'vitest';
}

/** The replay's lines of the summary: tasks replayable, calls that replay, and why the others do not. */
export function replayLines(coverage: ReplayCoverage[]): string[] {
  if (coverage.length === 0) return [];
  const replayable = coverage.filter((c) => c.replayable);
  const recorded = coverage.reduce((a, c) => a + c.recorded, 0);
  const kept = coverage.reduce((a, c) => a + c.kept, 0);
  const pct = (n: number, of: number) => (of === 0 ? '0' : ((100 * n) / of).toFixed(0));
  const inNode = replayable.filter((c) => c.mode === 'node').length;
  const lines = [
    `replay: ${replayable.length} of ${coverage.length} kept file task(s) replayable (${pct(replayable.length, coverage.length)}%); ` +
      `${kept} of the ${recorded} calls the tests make replay (${pct(kept, recorded)}%); ` +
      `${inNode} of ${replayable.length} replayed by node alone`,
  ];
  for (const c of coverage)
    lines.push(
      c.replayable
        ? `  ${c.taskId}: ${c.kept}/${c.recorded} calls replay (${c.mode})`
        : `  ${c.taskId}: not replayable: ${c.why ?? 'unknown'}`,
    );
  return lines;
}

function progress(done: number, total: number, kept: number): void {
  const width = 30;
  const filled = total === 0 ? width : Math.round((done / total) * width);
  const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} kept ${kept}`;
  if (process.stderr.isTTY) process.stderr.write(`\r${bar}${done === total ? '\n' : ''}`);
  // Without a terminal (CI logs, pipes): a line per tenth of the work, not per task.
  else if (done === total || Math.floor((done * 10) / total) > Math.floor(((done - 1) * 10) / total))
    process.stderr.write(`${bar}\n`);
}

/**
 * Refuses (CliError) a workspace that lacks the tasks' target files: it is not the checkout the tasks
 * were mined from, and dropping every task for it would only write an empty file.
 */
function refuseForeignWorkspace(dir: string, tasks: readonly TaskLine['task'][]): void {
  const missing = tasks.filter((t) => !existsSync(join(dir, t.target)));
  if (missing.length === 0) return;
  throw new CliError(
    `workspace ${dir} has no ${missing[0]!.target}${missing.length > 1 ? ` (nor the targets of ${missing.length - 1} other task(s))` : ''}: ` +
      'is it the checkout the tasks were mined from? (--workspace DIR chooses another)',
  );
}

export const command: Command = {
  name: 'calibrate',
  summary: 'keep only the tasks whose reference scores 1.0 in the sandbox',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const jobs = values.jobs;
    const lines = await readTasksFile(values.tasks).catch((err: Error) => {
      throw new CliError(err.message);
    });
    // Every workspace must be able to run its tasks' judges: refuse up front, not as N silent drops.
    const byWorkspace = new Map<string, TaskLine['task'][]>();
    for (const { task } of lines) {
      const dir = values.workspace ?? task.workspace.root;
      if (!dir) throw new CliError(`task ${task.id} names no workspace root: pass --workspace DIR`, 2);
      byWorkspace.set(dir, [...(byWorkspace.get(dir) ?? []), task]);
    }
    for (const [dir, tasks] of byWorkspace) {
      refuseUnreadyWorkspace(dir, tasks);
      refuseForeignWorkspace(dir, tasks);
    }
    const controller = new AbortController();
    const stop = () => controller.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    try {
      const scorer = await openScorer({
        unconfined: values.unconfined,
        refusing: 'refusing to calibrate',
        signal: controller.signal,
      });
      const kept = new Set<TaskLine>();
      const dropped: Dropped[] = [];
      const unscored: Dropped[] = [];
      const coverage: ReplayCoverage[] = [];
      let done = 0;
      const calibrateOne = async (l: TaskLine): Promise<void> => {
        const { task } = l;
        const workspaceDir = values.workspace ?? task.workspace.root;
        try {
          if (!workspaceDir) throw new Error('the task names no workspace root (pass --workspace)');
          const reference = await readFile(join(workspaceDir, task.target), 'utf8').catch((err: Error) => {
            throw new Error(`cannot read the reference ${task.target}: ${err.message}`);
          });
          const r = await scorer.score({
            task,
            workspaceDir,
            candidate: reference,
            signal: controller.signal,
          });
          for (const w of r.warnings) process.stderr.write(`vtnode calibrate: ${task.id}: warning: ${w}\n`);
          if (r.status === 'error')
            unscored.push({ taskId: task.id, reason: r.error ?? 'infrastructure failure' });
          else if (r.reward === 1) {
            kept.add(l);
            if (r.replay) {
              const { replayable, why, recorded, kept: replayed, mode } = r.replay;
              coverage.push({ taskId: task.id, replayable, why, recorded, kept: replayed, mode });
            }
          } else
            dropped.push({
              taskId: task.id,
              reason: `reference scored ${r.reward}: ${r.reasons.join('; ') || 'below 1.0'}`,
            });
        } catch (err) {
          // Not a verdict on the task (the scorer could not run it): never a drop.
          unscored.push({ taskId: task.id, reason: (err as Error).message });
        }
        done++;
        progress(done, lines.length, kept.size);
      };
      const queue = [...lines];
      await Promise.all(
        Array.from({ length: Math.min(jobs, queue.length) }, async () => {
          for (let l = queue.shift(); l; l = queue.shift()) {
            if (controller.signal.aborted) break;
            await calibrateOne(l);
          }
        }),
      );
      if (controller.signal.aborted) throw new CliError('interrupted: nothing written', 130);
      for (const d of dropped) process.stderr.write(`dropped ${d.taskId}: ${d.reason}\n`);
      for (const d of unscored) process.stderr.write(`unscored ${d.taskId}: ${d.reason}\n`);
      // Every reference failing says more about the workspace than about the tasks: no empty file.
      if (lines.length > 0 && kept.size === 0 && unscored.length === 0)
        throw new CliError(
          `no reference of the ${lines.length} task(s) scored 1.0 in ${[...byWorkspace.keys()].join(', ') || 'their workspaces'} ` +
            '(reasons above): is the workspace built, and the checkout the tasks were mined from? Nothing written',
        );
      const out = lines.filter((l) => kept.has(l)).map((l) => `${l.line}\n`);
      const tmp = `${values.out}.tmp-${process.pid}`;
      await writeFile(tmp, out.join(''));
      await rename(tmp, values.out);
      process.stderr.write(
        `calibrated ${lines.length} task(s): kept ${kept.size}, dropped ${dropped.length}${unscored.length ? `, unscored ${unscored.length} (infrastructure: run calibrate again for them)` : ''}\n`,
      );
      coverage.sort((a, b) => (a.taskId < b.taskId ? -1 : 1));
      for (const line of replayLines(coverage)) process.stderr.write(`${line}\n`);
      if (values.json)
        process.stdout.write(`${JSON.stringify({ kept: kept.size, dropped, unscored, replay: coverage })}\n`);
      return unscored.length > 0 ? 3 : 0;
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    }
  },
};
