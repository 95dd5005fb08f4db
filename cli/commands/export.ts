import { EXPORT_FORMATS, exportDataset } from '../../node/collector/export.ts';
import { ExportTargetError } from '../../node/collector/export-dir.ts';
import { openExistingDataset } from '../../node/collector/open.ts';
import { CliError, type Command } from '../command.ts';
import { commandLine, flag, fraction, group, oneOf, string } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode export --from DATASET --format mlx|hf|repair --out DIR [options]

Writes training data from a collector's dataset, deterministically (the same dataset gives
byte-identical files), with manifest.json (sha256 of every file, counts, models, commits, fingerprints).
Only verified rows leave: reward >= the minimum, body checked against its digest, not quarantined
by an audit, still passing after the latest \`vtnode rescore\`, task known; one per task and
whitespace-normalised text.

Formats:
  mlx      train.jsonl, valid.jsonl (chat "messages") for mlx_lm.lora; train split only, valid drawn
           by source-sharing group, never from eval tasks
  hf       data/train.jsonl, data/test.jsonl (eval split) and a README.md dataset card
  repair   a failed candidate plus its diagnostics as the prompt, a passing sample as the answer`,
  groups: [
    group('Options:', {
      from: string({ doc: 'dataset dir written by `vtnode collect`', value: 'DATASET', required: true }),
      format: oneOf(EXPORT_FORMATS, { doc: 'the training data format', value: 'FORMAT', required: true }),
      out: string({
        doc: 'output dir: created, or replaced as a whole when it holds a previous export (written beside it, then swapped in: no stale file remains, and a failure leaves the previous export intact); any other non-empty dir is refused',
        value: 'DIR',
        required: true,
      }),
      force: flag({ doc: 'replace a non-empty --out that is not a previous export (and all in it)' }),
      'min-reward': fraction({ doc: "verified threshold (default: the dataset's, 1.0)", value: 'R' }),
      'valid-fraction': fraction({ doc: 'share of source-sharing groups for valid.jsonl', default: 0.1 }),
      json: flag({ doc: 'print the manifest as JSON' }),
    }),
  ],
});

export const command: Command = {
  name: 'export',
  summary: 'write training data (mlx, hf, repair) from a dataset',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const store = openExistingDataset(values.from);
    if (!store)
      throw new CliError(
        `${values.from} is not a dataset (no dataset.db): run \`vtnode collect --out ${values.from}\``,
      );
    try {
      const manifest = await exportDataset({
        ...(values.force ? { force: true } : {}),
        store,
        format: values.format,
        out: values.out,
        ...(values['min-reward'] !== undefined ? { minReward: values['min-reward'] } : {}),
        validFraction: values['valid-fraction'],
      });
      if (values.json) process.stdout.write(`${JSON.stringify(manifest, null, 2)}\n`);
      else {
        const lines = manifest.files.map(
          (f) =>
            `  ${f.path.padEnd(18)} ${f.path.endsWith('.jsonl') ? `${String(f.rows).padStart(7)} rows  ` : ''.padStart(14)}${f.bytes} bytes`,
        );
        process.stdout.write(
          `${values.format} export of ${manifest.counts.rows} rows from ${manifest.counts.tasks} tasks to ${values.out}\n${lines.join('\n')}\n`,
        );
        const ex = Object.entries(manifest.counts.excluded).filter(([, n]) => n > 0);
        if (ex.length) process.stdout.write(`  left out: ${ex.map(([k, n]) => `${n} ${k}`).join(', ')}\n`);
        for (const w of manifest.warnings) process.stderr.write(`warning: ${w}\n`);
      }
      return 0;
    } catch (err) {
      if (err instanceof ExportTargetError) throw new CliError(err.message);
      throw err;
    } finally {
      store.close();
    }
  },
};
