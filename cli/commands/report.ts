import { openExistingDataset } from '../../node/collector/open.ts';
import { buildReport } from '../../node/collector/report.ts';
import { CliError, type Command, intOption, parseOptions } from '../command.ts';
import { fractionOption } from './export.ts';

const usage = `Usage: vtnode report --from DATASET [--split train|eval] [-k K] [--json]

The eval table: per model, tasks, samples, pass@1 and pass@k (the unbiased estimator of Chen et
al. 2021 over every scored sample, verified or not), mean reward, truncation rate, tokens/s and
prompt-cache hit rate (the share of samples whose prompt was warm, as \`vtnode run\` counts it;
--json also gives cachedTokenRate, cached over prompt tokens). A sample id claimed by several nodes counts once when the claims agree or
audits settled them; claims of different rewards that no audit settled are left out and listed as
disputed (--json: \`disputed\`).

Options:
  --from DATASET     dataset dir written by \`vtnode collect\`
  --split SPLIT      only tasks of this split (default: all)
  -k K               k for pass@k (default: the smallest per-task sample count)
  --min-reward R     pass threshold (default: the dataset's, 1.0)
  --json             JSON: { models: [{ model, tasks, samples, pass1, passk, k, meanReward, disputed, ... }],
                     disputed: [{ sampleId, claims: [{ origin, seq, reward, audit, ... }] }] }`;

const pct = (x: number | null) => (x === null ? '-' : `${(x * 100).toFixed(1)}%`);

export const command: Command = {
  name: 'report',
  summary: 'pass@1, pass@k and generation statistics per model',
  usage,
  async run(argv) {
    const { values } = parseOptions(
      argv,
      {
        from: { type: 'string' },
        split: { type: 'string' },
        k: { type: 'string', short: 'k' },
        'min-reward': { type: 'string' },
        json: { type: 'boolean' },
      },
      usage,
    );
    if (!values.from) throw new CliError(`--from is required\n\n${usage}`, 2);
    if (values.split !== undefined && values.split !== 'train' && values.split !== 'eval')
      throw new CliError(`--split must be train or eval, got "${values.split}"`, 2);
    const k = values.k === undefined ? undefined : intOption(values.k, 'k', 1);
    if (k === 0) throw new CliError('-k must be at least 1', 2);
    const store = openExistingDataset(values.from);
    if (!store) throw new CliError(`${values.from} is not a dataset (no dataset.db)`);
    try {
      const report = buildReport(store.samples(), {
        ...(values.split ? { split: values.split as 'train' | 'eval' } : {}),
        ...(k !== undefined ? { k } : {}),
        minReward: fractionOption(
          values['min-reward'],
          'min-reward',
          Number(store.getMeta('minReward') ?? 1),
        ),
      });
      if (values.json) {
        process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        return 0;
      }
      const disputedNote = report.disputed.length
        ? `note: ${report.disputed.length} sample ids left out: their nodes claim different rewards and no audit settled it (--json lists them)\n`
        : '';
      if (report.models.length === 0) {
        process.stdout.write(
          `no scored samples${values.split ? ` in the ${values.split} split` : ''}\n${disputedNote}`,
        );
        return 0;
      }
      const head = [
        'model',
        'tasks',
        'samples',
        'pass@1',
        'pass@k',
        'k',
        'reward',
        'trunc',
        'tok/s',
        'cache',
      ];
      const rows = report.models.map((m) => [
        m.model,
        String(m.tasks),
        String(m.samples),
        pct(m.pass1),
        pct(m.passk),
        String(m.k),
        m.meanReward.toFixed(3),
        pct(m.truncationRate),
        m.tokensPerSecond === null ? '-' : m.tokensPerSecond.toFixed(1),
        pct(m.cacheHitRate),
      ]);
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      const fmt = (r: string[]) =>
        r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
      process.stdout.write(
        `split: ${report.split}, pass = reward >= ${report.minReward}\n${fmt(head)}\n${rows.map(fmt).join('\n')}\n`,
      );
      const audited = report.models.filter((m) => m.auditFailures > 0);
      for (const m of audited)
        process.stdout.write(
          `note: ${m.auditFailures} claims of ${m.model} contradicted by an audit (left out, or counted with the audited reward)\n`,
        );
      process.stdout.write(disputedNote);
      return 0;
    } finally {
      store.close();
    }
  },
};
