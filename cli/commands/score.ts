import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ScoreResult } from '../../sandbox/scorer.ts';
import { readTasksFile, unreadable } from '../../sandbox/tasks-file.ts';
import { CliError, type Command } from '../command.ts';
import { commandLine, flag, group, string } from '../options.ts';
import { openScorer, refuseUnreadyWorkspace } from '../scorer.ts';

const line = commandLine({
  prose: `Usage: vtnode score --tasks FILE --task ID --candidate FILE [options]

Scores one candidate for one task: the candidate is written over the task's target in a confined
copy-on-write box, the task's tests run there, and the reward, per-test results, lints, reasons and
diagnostics are printed. Exits 3 when the candidate could not be scored for infrastructure reasons (a
box that could not be set up, a run stopped by its wall-clock limit on a loaded machine): that is not
a reward of 0, and scoring again may succeed.`,
  groups: [
    group('Options:', {
      tasks: string({ doc: 'tasks.jsonl', value: 'FILE', required: true }),
      task: string({ doc: 'the task to score', value: 'ID', required: true }),
      candidate: string({
        doc: "the candidate's text (a source file, or a test file for a tests task)",
        value: 'FILE',
        required: true,
      }),
      workspace: string({
        doc: "the built checkout to score in (default: the task's workspace.root)",
        value: 'DIR',
      }),
      truncated: flag({ doc: 'the generation was cut at its length limit (scores 0)' }),
      unconfined: flag({ doc: 'run without the sandbox (trusted input only)' }),
      json: flag({ doc: 'print one JSON object' }),
    }),
  ],
});

function human(r: ScoreResult): string {
  if (r.status === 'error')
    return `task ${r.taskId}: NOT SCORED (infrastructure, not a verdict on the candidate): ${r.error}\n`;
  const lines = [
    `task ${r.taskId}: reward ${r.reward}${r.status === 'timeout' ? ' — timeout (the run did not finish)' : ''} (pass rate ${r.passRate.toFixed(3)}; ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped, ${r.todo} todo)`,
    `type-check: ${r.typecheck}   backend: ${r.backend}   fingerprint: ${r.fingerprint}`,
  ];
  for (const t of r.tests)
    lines.push(`  ${t.status.padEnd(7)} ${t.file} :: ${t.name}${t.message ? `  (${t.message})` : ''}`);
  for (const l of r.lints) lines.push(`lint added: ${l.name} ×${l.added}`);
  for (const t of r.tamper) lines.push(`tamper added: ${t.name} ×${t.added}`);
  for (const reason of r.reasons) lines.push(`reason: ${reason}`);
  if (r.diagnostics) lines.push('diagnostics:', r.diagnostics);
  return `${lines.join('\n')}\n`;
}

export const command: Command = {
  name: 'score',
  summary: 'score one candidate for one task in the sandbox',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const lines = await readTasksFile(values.tasks).catch((err: Error) => {
      throw new CliError(err.message);
    });
    const found = lines.find((l) => l.task.id === values.task);
    if (!found) throw new CliError(`task ${values.task} is not in ${values.tasks}`);
    const task = found.task;
    const workspaceDir = values.workspace ?? task.workspace.root;
    if (!workspaceDir) throw new CliError(`task ${task.id} names no workspace root: pass --workspace DIR`, 2);
    const candidate = await readFile(values.candidate, 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new CliError(unreadable('candidate file', values.candidate, err));
    });
    await readFile(join(workspaceDir, task.target)).catch(() => {
      throw new CliError(`workspace ${workspaceDir} has no ${task.target}: is it the task's checkout?`);
    });
    refuseUnreadyWorkspace(workspaceDir, [task]);
    const controller = new AbortController();
    const stop = () => controller.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    try {
      const scorer = await openScorer({
        unconfined: values.unconfined,
        refusing: 'refusing to score',
        signal: controller.signal,
      });
      const result = await scorer.score({
        task,
        workspaceDir,
        candidate,
        truncated: values.truncated ?? false,
        signal: controller.signal,
      });
      for (const w of result.warnings) process.stderr.write(`vtnode score: warning: ${w}\n`);
      process.stdout.write(values.json ? `${JSON.stringify(result)}\n` : human(result));
      // Not scored (infrastructure): no reward exists for this candidate; exit 3 so scripts retry.
      return result.status === 'error' ? 3 : 0;
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    }
  },
};
