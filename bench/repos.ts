/**
 * Public repositories, measured: for each local checkout, the source↔test pairs the bench finds with
 * TypeScript's module resolution, the tasks `mine` makes of them, and a calibration of a deterministic
 * sample of those tasks through the real sandbox scorer, with the CPU a candidate costs.
 *
 *   nice -n 10 npx node bench/repos.ts --repos /work/repos/a,/work/repos/b [--sample 20] [--json out.json]
 *   nice -n 10 npx node bench/repos.ts --repos repos.json
 *
 * repos.json: `["/abs/path", …]` or `[{ "name", "root", "runner"?, "layout"? }, …]`. Checkouts are
 * never fetched or built here: see docs/benchmarks.md for how they were made. Repositories run one
 * after the other, one score at a time (the machine is shared).
 */
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { workspaceId } from '../node/workspace/content-id.ts';
import { parseWith } from '../protocol/parse.ts';
import { createCheckedScorer, type Scorer } from '../sandbox/scorer.ts';
import { readRepoList } from './repos/list.ts';
import { measureRepo, type RepoResult } from './repos/measure.ts';
import { renderReport } from './repos/report.ts';

const Options = z.object({
  repos: z.string().min(1, 'give --repos a comma-separated list of checkouts or a JSON file'),
  sample: z.coerce.number().int().nonnegative(),
  json: z.string().optional(),
  'no-tsc-baseline': z.boolean(),
  unconfined: z.boolean(),
});

const { values } = parseArgs({
  options: {
    repos: { type: 'string', default: '' },
    sample: { type: 'string', default: '20' },
    json: { type: 'string' },
    'no-tsc-baseline': { type: 'boolean', default: false },
    unconfined: { type: 'boolean', default: false },
  },
});
const options = parseWith(Options, values, 'bench/repos.ts options');
const specs = await readRepoList(options.repos);

const controller = new AbortController();
process.once('SIGINT', () => controller.abort());
process.once('SIGTERM', () => controller.abort());
// Opened on first use: its self-test runs once, for every repository.
const opened: { scorer: Promise<Scorer> | null } = { scorer: null };
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

const results: RepoResult[] = [];
for (const spec of specs) {
  results.push(
    await measureRepo(spec, {
      sample: options.sample,
      tscBaseline: !options['no-tsc-baseline'],
      scorer: () =>
        (opened.scorer ??= createCheckedScorer({
          workspaceId,
          unconfined: options.unconfined,
          signal: controller.signal,
        })),
      log,
      signal: controller.signal,
    }),
  );
}
const report = {
  measuredAt: new Date().toISOString(),
  node: process.version,
  backend: opened.scorer ? (await opened.scorer).confinement.name : null,
  sample: options.sample,
  results,
};
process.stdout.write(renderReport(results));
if (options.json) await writeFile(options.json, `${JSON.stringify(report, null, 2)}\n`);
else process.stdout.write(`\n\`\`\`json\n${JSON.stringify(report)}\n\`\`\`\n`);
// The type-check services the scorer started end with it.
await (await opened.scorer)?.close();
