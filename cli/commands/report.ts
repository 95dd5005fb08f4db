import { openExistingDataset } from '../../node/collector/open.ts';
import { buildReport } from '../../node/collector/report.ts';
import { CliError, type Command } from '../command.ts';
import { commandLine, flag, fraction, group, int, oneOf, string } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode report --from DATASET [--split train|eval] [-k K] [--json]

The eval table: per model, tasks, samples, pass@1 and pass@k (the unbiased estimator of Chen et
al. 2021 over every scored sample, verified or not), mean reward, truncation rate, tokens/s and
prompt-cache hit rate (the share of samples whose prompt was warm, as \`vtnode run\` counts it;
--json also gives cachedTokenRate, cached over prompt tokens). A sample id claimed by several nodes counts once when the claims agree or
audits settled them; claims of different rewards that no audit settled are left out and listed as
disputed (--json: \`disputed\`).`,
  groups: [
    group('Options:', {
      from: string({ doc: 'dataset dir written by `vtnode collect`', value: 'DATASET', required: true }),
      split: oneOf(['train', 'eval'], { doc: 'only tasks of this split (default: all)', value: 'SPLIT' }),
      k: int({
        doc: 'k for pass@k (default: the smallest per-task sample count)',
        short: 'k',
        value: 'K',
        min: 1,
      }),
      'min-reward': fraction({ doc: "pass threshold (default: the dataset's, 1.0)", value: 'R' }),
      json: flag({
        doc: 'JSON: { models: [{ model, tasks, samples, pass1, passk, k, meanReward, disputed, ... }], disputed: [{ sampleId, claims: [{ origin, seq, reward, audit, ... }] }] }',
      }),
    }),
  ],
});

const pct = (x: number | null) => (x === null ? '-' : `${(x * 100).toFixed(1)}%`);

export const command: Command = {
  name: 'report',
  summary: 'pass@1, pass@k and generation statistics per model',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const k = values.k;
    const store = openExistingDataset(values.from);
    if (!store) throw new CliError(`${values.from} is not a dataset (no dataset.db)`);
    try {
      const report = buildReport(store.samples(), {
        ...(values.split ? { split: values.split } : {}),
        ...(k !== undefined ? { k } : {}),
        minReward: values['min-reward'] ?? Number(store.getMeta('minReward') ?? 1),
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
