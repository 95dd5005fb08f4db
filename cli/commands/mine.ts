import { randomBytes } from 'node:crypto';
import { rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readDenyTerms } from '../../node/tasks/deny.ts';
import { MineError, type MineSummary, mine, type TaskKind } from '../../node/tasks/mine.ts';
import { CliError, type Command } from '../command.ts';
import { commandLine, count, flag, fraction, group, int, number, string, usageError } from '../options.ts';

/** The example corpus shipped with vtnode: mined when no --root is given. */
export const DEFAULT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../examples/ledger');

const line = commandLine({
  prose: `Usage: vtnode mine [--root REPO] [--out tasks.jsonl] [options]

Mines coding tasks from a TypeScript/JavaScript repository's unit tests (vitest or node:test):
a "file" task masks one source file that tests exercise, a "tests" task masks one test file.
Tasks are split into train/eval by source-sharing group; the command fails if any eval target
text appears in a train prompt.`,
  groups: [
    group('Options:', {
      root: string({
        doc: `repository to mine (default: the bundled example corpus, ${DEFAULT_ROOT})`,
        value: 'REPO',
      }),
      out: string({
        doc: 'tasks file to write, one JSON task per line (default: ./tasks.jsonl)',
        value: 'FILE',
      }),
      kinds: string({ doc: 'task kinds: file,tests (default: both)', value: 'LIST' }),
      'eval-fraction': fraction({
        doc: 'fraction of groups held out for eval, by stable hash (default: 0.1); when no group with tasks hashes below it (small repositories), groups are held out in hash order until F of the tasks are',
      }),
      'eval-share': number({
        doc: 'instead, hold out whole groups (in stable hash order) until this share of the tasks is in eval: for repositories with few groups',
        value: 'F',
        above: 0,
        below: 1,
      }),
      'eval-modules': string({ doc: 'hold out every group containing one of these modules', value: 'LIST' }),
      'max-context': count({ doc: 'characters of file context per prompt', default: 60_000 }),
      'deny-terms': string({
        doc: 'never mine a file containing one of these terms (one per line, # comments)',
        value: 'FILE',
      }),
      'include-shared': flag({ doc: 'also mine shared helpers that most modules import' }),
      'timeout-ms': int({
        doc: 'judge time limit per test run (default: 30 s + 10 s per test file, max 300 s)',
        min: 1,
      }),
      'skip-install-check': flag({
        doc: 'mine even when the judges could not run here as installed (runner or dependencies missing, workspace packages unbuilt): for a checkout that another machine installs and scores',
      }),
      json: flag({ doc: 'print the summary as one JSON object on stdout' }),
    }),
  ],
});

function list(value: string | undefined): string[] | undefined {
  return value === undefined
    ? undefined
    : value
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean);
}

/** A one-line progress bar on stderr, redrawn at most every 100 ms. */
function progressBar(): { update(p: { phase: string; done: number; total: number }): void; end(): void } {
  let last = 0;
  let drawn = false;
  return {
    update({ phase, done, total }) {
      const now = Date.now();
      if (total < 200 || (now - last < 100 && done < total)) return;
      last = now;
      const width = 30;
      const filled = Math.round((done / total) * width);
      process.stderr.write(
        `\r${phase === 'read' ? 'reading' : 'mining '} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`,
      );
      drawn = true;
    },
    end() {
      if (drawn) process.stderr.write('\r\x1b[K');
    },
  };
}

/** Skipped files listed one per line in the human summary; --json lists all. */
const MAX_SKIPPED_SHOWN = 40;

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '))
    .join('\n');
}

function humanSummary(s: MineSummary, out: string | null): string {
  const lines: string[] = [];
  const ws = `${s.workspace.commit ?? 'not a git tree'}${s.workspace.clean ? '' : ' (unclean)'}`;
  lines.push(`mined ${s.root} (${s.runner}; ${s.runnerEvidence}; tests from ${s.testSelection}) at ${ws}`);
  const rows = [['module', 'group', 'split', 'file', 'tests']];
  for (const [m, r] of Object.entries(s.byModule).sort())
    rows.push([m, r.group, r.split, String(r.file), String(r.tests)]);
  if (rows.length > 1) lines.push('', table(rows));
  lines.push(
    '',
    `tasks: ${s.tasks} (file ${s.byKind.file}, tests ${s.byKind.tests}; train ${s.bySplit.train}, eval ${s.bySplit.eval}) in ${s.groups.length} group(s)`,
  );
  if (s.flaky > 0) lines.push(`flaky: ${s.flaky} task(s) run timer-based tests (judge.flaky)`);
  if (s.withoutTypecheck > 0)
    lines.push(`no type-check: ${s.withoutTypecheck} task(s) (no tsconfig covers target and tests)`);
  if (s.skipped.length > 0) {
    const byReason = new Map<string, number>();
    for (const k of s.skipped) {
      const key = k.reason.replace(/ \(.*$|:.*$/, '');
      byReason.set(key, (byReason.get(key) ?? 0) + 1);
    }
    lines.push(
      `skipped: ${s.skipped.length} file(s): ${[...byReason].map(([r, n]) => `${n} ${r}`).join('; ')}`,
    );
    for (const k of s.skipped.slice(0, MAX_SKIPPED_SHOWN)) lines.push(`  ${k.path}: ${k.reason}`);
    if (s.skipped.length > MAX_SKIPPED_SHOWN)
      lines.push(`  ... and ${s.skipped.length - MAX_SKIPPED_SHOWN} more (--json lists every one)`);
  }
  lines.push(`leakage: ${s.leakage}`);
  for (const l of s.leaks.slice(0, 10))
    lines.push(`  eval ${l.evalTarget} appears in train task ${l.trainTask}`);
  lines.push(
    out
      ? `wrote ${out} in ${(s.durationMs / 1000).toFixed(2)} s`
      : `nothing written (${s.leakage > 0 ? 'leakage must be 0' : 'no tasks'})`,
  );
  return `${lines.join('\n')}\n`;
}

export const command: Command = {
  name: 'mine',
  summary: 'mine coding tasks from a repository’s unit tests into tasks.jsonl',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const kinds = list(values.kinds) ?? ['file', 'tests'];
    const badKind = kinds.find((k) => k !== 'file' && k !== 'tests');
    if (badKind !== undefined || kinds.length === 0)
      throw new CliError(`--kinds takes file, tests or file,tests; got "${values.kinds}"`, 2);
    const evalFraction = values['eval-fraction'] ?? 0.1;
    const evalShare = values['eval-share'];
    if (evalShare !== undefined && values['eval-fraction'] !== undefined)
      throw usageError('--eval-share and --eval-fraction are exclusive: pick one', line.usage);
    const maxContext = values['max-context'];
    const timeoutMs = values['timeout-ms'];
    let denyTerms: string[] = [];
    if (values['deny-terms'] !== undefined) {
      try {
        denyTerms = await readDenyTerms(values['deny-terms']);
      } catch (err) {
        throw new CliError(`--deny-terms ${values['deny-terms']}: ${(err as Error).message}`, 2);
      }
    }
    const root = resolve(values.root ?? DEFAULT_ROOT);
    const out = resolve(values.out ?? 'tasks.jsonl');
    const outDir = await stat(dirname(out)).catch(() => null);
    if (!outDir?.isDirectory()) throw new CliError(`--out ${out}: folder ${dirname(out)} does not exist`, 2);
    // The file is replaced by rename: never do that to a device, a pipe or a folder.
    const existing = await stat(out).catch(() => null);
    if (existing && !existing.isFile())
      throw new CliError(`--out ${out}: exists and is not a regular file`, 2);

    const bar = process.stderr.isTTY && !values.json ? progressBar() : null;
    let result: Awaited<ReturnType<typeof mine>>;
    try {
      result = await mine({
        root,
        kinds: kinds as TaskKind[],
        evalFraction,
        ...(evalShare !== undefined ? { evalShare } : {}),
        evalModules: list(values['eval-modules']) ?? [],
        maxContext,
        denyTerms,
        includeShared: values['include-shared'] === true,
        installCheck: values['skip-install-check'] !== true,
        ...(timeoutMs !== undefined ? { testTimeoutMs: timeoutMs } : {}),
        ...(bar ? { onProgress: (p) => bar.update(p) } : {}),
      });
    } catch (err) {
      if (err instanceof MineError) throw new CliError(err.message, 1);
      throw err;
    } finally {
      bar?.end();
    }
    const { tasks, summary } = result;
    const ok = summary.leakage === 0 && summary.tasks > 0;
    if (ok) {
      // Write atomically: a reader never sees half a tasks file.
      const tmp = `${out}.${randomBytes(4).toString('hex')}.tmp`;
      try {
        await writeFile(tmp, tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
        await rename(tmp, out);
      } catch (err) {
        await rm(tmp, { force: true });
        throw err;
      }
    }
    for (const w of summary.warnings) process.stderr.write(`vtnode mine: warning: ${w}\n`);
    if (values.json) process.stdout.write(`${JSON.stringify({ ...summary, out: ok ? out : null })}\n`);
    else process.stdout.write(humanSummary(summary, ok ? out : null));
    if (summary.leakage > 0) {
      process.stderr.write(
        `vtnode: leakage check failed: ${summary.leakage} eval task(s) have their target text in a train prompt; no tasks written\n`,
      );
      return 1;
    }
    if (summary.tasks === 0) {
      process.stderr.write(
        'vtnode: no tasks mined: every candidate file was skipped (see the reasons); nothing written\n',
      );
      return 1;
    }
    return 0;
  },
};
