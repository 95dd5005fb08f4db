import { resolve } from 'node:path';
import { openExistingDataset } from '../../node/collector/open.ts';
import { rescoreDataset } from '../../node/collector/rescore.ts';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import { readTasks } from '../../sandbox/tasks-file.ts';
import { CliError, type Command } from '../command.ts';
import { commandLine, flag, fraction, group, string } from '../options.ts';
import { openScorer } from '../scorer.ts';

const line = commandLine({
  prose: `Usage: vtnode rescore --from DATASET --workspace NEW [--tasks FILE] [--json]

Re-scores the dataset's verified samples against a new version of the platform (a built checkout):
rows that no longer pass leave the next export, and are listed here per task with the judge's
diagnostics (which APIs moved). A later rescore replaces the earlier result.`,
  groups: [
    group('Options:', {
      from: string({ doc: 'dataset dir written by `vtnode collect`', value: 'DATASET', required: true }),
      workspace: string({ doc: 'the new workspace (built checkout)', value: 'NEW', required: true }),
      tasks: string({
        doc: "tasks mined from the new workspace (`vtnode mine`): each sample is scored with the new task of the same kind and target; without it, each task is carried over (same tests, the target's new content as the reference)",
        value: 'FILE',
      }),
      'min-reward': fraction({ doc: "pass threshold (default: the dataset's, 1.0)", value: 'R' }),
      unconfined: flag({ doc: 'run without the sandbox (trusted input only)' }),
      json: flag({ doc: 'print the result as JSON' }),
    }),
  ],
});

export const command: Command = {
  name: 'rescore',
  summary: 're-score verified samples against a new workspace',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const store = openExistingDataset(values.from);
    if (!store) throw new CliError(`${values.from} is not a dataset (no dataset.db)`);
    try {
      const newTasks = values.tasks ? await readTasks(values.tasks) : undefined;
      const workspaceDir = resolve(values.workspace);
      const ws = await workspaceIdentity(workspaceDir);
      const scorer = await openScorer({ unconfined: values.unconfined, refusing: 'refusing to re-score' });
      const result = await rescoreDataset({
        store,
        scorer,
        workspaceDir,
        workspace: { id: ws.id, commit: ws.commit, clean: ws.clean },
        ...(newTasks ? { newTasks } : {}),
        ...(values['min-reward'] !== undefined ? { minReward: values['min-reward'] } : {}),
        onProgress: values.json
          ? undefined
          : (done, total) => process.stderr.write(`\rrescored ${done}/${total}`),
      });
      // Samples the sandbox could not score (infrastructure) are not judged: exit 3 so scripts run it again.
      const code = result.unscored.length > 0 ? 3 : 0;
      if (values.json) {
        process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
        return code;
      }
      process.stderr.write('\n');
      const tasks = Object.entries(result.broken);
      process.stdout.write(
        `rescored ${result.rescored} verified samples against ${ws.id}${ws.commit ? ` (commit ${ws.commit})` : ''}: ${result.stillPassing} still pass, ${result.rescored - result.stillPassing} no longer pass in ${tasks.length} tasks\n`,
      );
      for (const [task, list] of tasks) {
        process.stdout.write(`\n${task}: ${list.length} no longer pass\n`);
        const first = list[0]!;
        process.stdout.write(`  reasons: ${first.reasons.join('; ') || '(none)'}\n`);
        if (first.diagnostics) process.stdout.write(`${first.diagnostics.replace(/^/gm, '    ')}\n`);
      }
      if (code !== 0)
        process.stdout.write(
          `\n${result.unscored.length} samples could not be scored (infrastructure; nothing recorded for them): ${result.unscored[0]!.error}\nrun vtnode rescore again\n`,
        );
      return code;
    } finally {
      store.close();
    }
  },
};
