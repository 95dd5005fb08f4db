import { EXPORT_FORMATS, type ExportFormat, exportDataset } from '../../node/collector/export.ts';
import { ExportTargetError } from '../../node/collector/export-dir.ts';
import { openExistingDataset } from '../../node/collector/open.ts';
import { CliError, type Command, parseOptions } from '../command.ts';

const usage = `Usage: vtnode export --from DATASET --format mlx|hf|repair --out DIR [options]

Writes training data from a collector's dataset, deterministically (the same dataset gives
byte-identical files), with manifest.json (sha256 of every file, counts, models, commits, fingerprints).
Only verified rows leave: reward >= the minimum, body checked against its digest, not quarantined
by an audit, still passing after the latest \`vtnode rescore\`, task known; one per task and
whitespace-normalised text.

Formats:
  mlx      train.jsonl, valid.jsonl (chat "messages") for mlx_lm.lora; train split only, valid drawn
           by source-sharing group, never from eval tasks
  hf       data/train.jsonl, data/test.jsonl (eval split) and a README.md dataset card
  repair   a failed candidate plus its diagnostics as the prompt, a passing sample as the answer

Options:
  --from DATASET          dataset dir written by \`vtnode collect\`
  --format FORMAT         mlx, hf or repair
  --out DIR               output dir: created, or replaced as a whole when it holds a previous
                          export (written beside it, then swapped in: no stale file remains, and
                          a failure leaves the previous export intact); any other non-empty dir
                          is refused
  --force                 replace a non-empty --out that is not a previous export (and all in it)
  --min-reward R          verified threshold (default: the dataset's, 1.0)
  --valid-fraction F      share of source-sharing groups for valid.jsonl (default 0.1)
  --json                  print the manifest as JSON`;

export function fractionOption(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 1)
    throw new CliError(`--${name} must be a number in [0, 1], got "${value}"`, 2);
  return n;
}

export const command: Command = {
  name: 'export',
  summary: 'write training data (mlx, hf, repair) from a dataset',
  usage,
  async run(argv) {
    const { values } = parseOptions(
      argv,
      {
        from: { type: 'string' },
        format: { type: 'string' },
        out: { type: 'string' },
        'min-reward': { type: 'string' },
        'valid-fraction': { type: 'string' },
        force: { type: 'boolean' },
        json: { type: 'boolean' },
      },
      usage,
    );
    if (!values.from || !values.out || !values.format)
      throw new CliError(`--from, --format and --out are required\n\n${usage}`, 2);
    if (!EXPORT_FORMATS.includes(values.format as ExportFormat))
      throw new CliError(`--format must be one of ${EXPORT_FORMATS.join(', ')}, got "${values.format}"`, 2);
    const store = openExistingDataset(values.from);
    if (!store)
      throw new CliError(
        `${values.from} is not a dataset (no dataset.db): run \`vtnode collect --out ${values.from}\``,
      );
    try {
      const manifest = await exportDataset({
        ...(values.force ? { force: true } : {}),
        store,
        format: values.format as ExportFormat,
        out: values.out,
        ...(values['min-reward'] !== undefined
          ? { minReward: fractionOption(values['min-reward'], 'min-reward', 1) }
          : {}),
        validFraction: fractionOption(values['valid-fraction'], 'valid-fraction', 0.1),
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
