import { sha256Hex } from '../../protocol/canonical.ts';
import { type ChatMessage, type Task, taskHash } from '../../protocol/task.ts';
import { VTNODE_VERSION } from '../../protocol/version.ts';
import { fenced, languageOf } from '../tasks/prompt.ts';
import { MANIFEST, writeExport } from './export-dir.ts';
import { type Selection, selectRows, taskFinder, type VerifiedRow } from './select.ts';
import type { DatasetStore } from './store.ts';

export type ExportFormat = 'mlx' | 'hf' | 'repair';
export const EXPORT_FORMATS: readonly ExportFormat[] = ['mlx', 'hf', 'repair'];

export interface ExportOptions {
  /** The dataset to export. */
  store: DatasetStore;
  format: ExportFormat;
  /**
   * Output dir: created, or replaced as a whole when it holds a previous export (export-dir.ts);
   * any other non-empty dir is refused (ExportTargetError) unless `force`.
   */
  out: string;
  /** Replace a non-empty `out` that is not a previous export (everything in it is deleted). */
  force?: boolean;
  /** Reward at or above which a sample is verified (default: the dataset's, else 1). */
  minReward?: number;
  /** Share of source-sharing groups drawn for `valid.jsonl` (mlx, repair; default 0.1). */
  validFraction?: number;
}

export interface ExportedFile {
  path: string;
  sha256: string;
  bytes: number;
  rows: number;
}

/** manifest.json: what an export holds and where it came from. */
export interface Manifest {
  format: ExportFormat;
  generator: string;
  minReward: number;
  /** The dataset's content digest at export time. */
  dataset: string;
  files: ExportedFile[];
  counts: {
    rows: number;
    tasks: number;
    groups: number;
    validGroups: number;
    excluded: Selection['excluded'];
    missingTasks: number;
  };
  models: string[];
  commits: string[];
  workspaces: string[];
  evalFingerprints: string[];
  promptFingerprints: number;
  /**
   * Provenance of every task row the export uses: its content hash (what the samples' signed digests
   * commit to, for v2 digests), its task id, and where the collector got it: the peer id that
   * served it (checked against the hash), or `file` / `file:PATH` for a tasks file. Ordered by hash.
   */
  taskRows: { hash: string; taskId: string; source: string }[];
  warnings: string[];
}

const groupRank = (group: string) => Number.parseInt(sha256Hex(`valid:${group}`).slice(0, 12), 16) / 2 ** 48;

/**
 * Draws validation groups: every source-sharing group whose hash falls below `fraction`, at least
 * one when there are two or more groups, never all of them. Deterministic in the group names.
 */
export function validGroups(groups: Iterable<string>, fraction: number): Set<string> {
  const all = [...new Set(groups)].sort((a, b) => groupRank(a) - groupRank(b) || a.localeCompare(b));
  const chosen = all.filter((g) => groupRank(g) < fraction);
  if (chosen.length === 0 && all.length >= 2 && fraction > 0) chosen.push(all[0]!);
  if (chosen.length === all.length && all.length > 0) chosen.pop();
  return new Set(chosen);
}

function answer(task: Task, candidate: string): ChatMessage {
  return { role: 'assistant', content: fenced(candidate, languageOf(task.target).fence) };
}

/** What a training pair is drawn into valid.jsonl by. */
export interface ValidCandidate {
  /** Its task's source-sharing group. */
  group: string;
  /** Its task. */
  taskId: string;
  /** Its own id (a sample id), unique among the candidates. */
  id: string;
}

/**
 * The pairs drawn for valid.jsonl (indexes into `items`), with a warning when they share source with
 * train. mlx_lm.lora refuses an empty validation set, so it is never empty when there is a pair:
 * whole source-sharing groups when there are two or more (no shared source); with one group, whole
 * tasks; with one task, one of its pairs; with one pair, a copy of it (it stays in train too).
 * A fraction of 0 draws nothing.
 */
export function drawValid(
  items: readonly ValidCandidate[],
  fraction: number,
): { valid: Set<number>; copy: boolean; groups: Set<string>; warning: string | null } {
  const none = { valid: new Set<number>(), copy: false, groups: new Set<string>(), warning: null };
  // --valid-fraction 0 asks for no validation set.
  if (items.length === 0 || fraction <= 0) return none;
  const pick = (key: (c: ValidCandidate) => string, chosen: Set<string>) =>
    new Set(items.flatMap((c, i) => (chosen.has(key(c)) ? [i] : [])));
  const groups = validGroups(
    items.map((c) => c.group),
    fraction,
  );
  if (groups.size > 0) return { ...none, valid: pick((c) => c.group, groups), groups };
  // No leak-free split: the loss on valid.jsonl is optimistic, but mlx_lm.lora can run.
  const tasks = validGroups(
    items.map((c) => c.taskId),
    Math.max(fraction, Number.MIN_VALUE),
  );
  if (tasks.size > 0)
    return {
      ...none,
      valid: pick((c) => c.taskId, tasks),
      warning: `one source-sharing group only: valid.jsonl holds ${tasks.size} of its ${new Set(items.map((c) => c.taskId)).size} tasks, which share source with train (validation loss is optimistic)`,
    };
  const rows = validGroups(
    items.map((c) => c.id),
    Math.max(fraction, Number.MIN_VALUE),
  );
  if (rows.size > 0)
    return {
      ...none,
      valid: pick((c) => c.id, rows),
      warning: `one task only: valid.jsonl holds ${rows.size} of its ${items.length} rows (the same task as train: validation loss is optimistic)`,
    };
  return {
    ...none,
    valid: new Set([0]),
    copy: true,
    warning:
      'one row only: valid.jsonl is a copy of it, so that mlx_lm.lora runs (its validation loss says nothing); collect more samples',
  };
}

const jsonl = (rows: unknown[]) => rows.map((r) => `${JSON.stringify(r)}\n`).join('');

/** Where each task row of `used` came from, one entry per hash, ordered by hash. */
function provenance(
  used: readonly VerifiedRow[],
  rowsByHash: ReadonlyMap<string, { source: string }>,
): Manifest['taskRows'] {
  const out = new Map<string, Manifest['taskRows'][number]>();
  for (const r of used) {
    // A v2 digest names its row's hash; a v1 row (no hash signed) is the dataset's row of its id.
    const hash = r.sample.digest.taskHash ?? taskHash(r.task);
    out.set(hash, { hash, taskId: r.task.id, source: rowsByHash.get(hash)?.source ?? 'file' });
  }
  return [...out.values()].sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
}

/** The repair prompt: the task's prompt, the failed attempt, what the judge said. */
function repairMessages(failed: VerifiedRow, passing: VerifiedRow): ChatMessage[] {
  const { task } = failed;
  const lang = languageOf(task.target).fence;
  const lastUser = task.messages.findLastIndex((m) => m.role === 'user');
  const head = task.messages.slice(0, lastUser);
  const original = task.messages[lastUser]?.content ?? '';
  const score = failed.body.score;
  const diagnostics = [
    `Tests passed: ${score.passed}, failed: ${score.failed}.`,
    score.reasons.length ? `Reasons: ${score.reasons.join('; ')}` : '',
    score.diagnostics ? fenced(score.diagnostics, 'text') : '',
  ]
    .filter(Boolean)
    .join('\n');
  return [
    ...head,
    {
      role: 'user',
      content: `${original}\n\nA previous attempt:\n\n${fenced(failed.body.candidate, lang)}\n\nIt did not pass:\n${diagnostics}\n\nWrite the corrected file in full, in one code block.`,
    },
    answer(task, passing.body.candidate),
  ];
}

/**
 * Writes an export of a dataset: data files plus manifest.json; byte-identical for the same dataset.
 * The files are written beside `out` and swapped in (export-dir.ts): no stale file of an earlier
 * export remains, and a failure leaves the earlier export intact.
 */
export async function exportDataset(options: ExportOptions): Promise<Manifest> {
  const { store, format, out } = options;
  const minReward = options.minReward ?? Number(store.getMeta('minReward') ?? 1);
  const validFraction = options.validFraction ?? 0.1;
  const rowsByHash = store.taskRows();
  const selection = selectRows(store.samples(), taskFinder(store.tasks(), rowsByHash), minReward);
  const warnings: string[] = [];
  if (selection.missingTasks.length > 0)
    warnings.push(
      `${selection.missingTasks.length} task ids have samples but no task in the dataset (no row hashing to what their digests signed came from the nodes that ran them, or from \`vtnode collect --tasks\`); their samples are not exported`,
    );

  const files = new Map<string, { text: string; rows: number }>();
  const train = selection.rows.filter((r) => r.task.split === 'train');
  const groups = new Set(train.map((r) => r.task.group));
  let valid = new Set<string>();
  let used: VerifiedRow[] = [];

  if (format === 'mlx' || format === 'repair') {
    let pairs: { row: VerifiedRow; messages: ChatMessage[] }[];
    if (format === 'mlx') {
      used = train;
      pairs = train.map((row) => ({
        row,
        messages: [...row.task.messages, answer(row.task, row.body.candidate)],
      }));
    } else {
      const passingByTask = new Map<string, VerifiedRow>();
      for (const r of train) if (!passingByTask.has(r.task.id)) passingByTask.set(r.task.id, r);
      pairs = [];
      for (const f of selection.failed) {
        const passing = passingByTask.get(f.task.id);
        if (!passing || f.task.split !== 'train') continue;
        pairs.push({ row: f, messages: repairMessages(f, passing) });
        used.push(f, passing);
      }
    }
    const drawn = drawValid(
      pairs.map((p) => ({ group: p.row.task.group, taskId: p.row.task.id, id: p.row.body.sampleId })),
      validFraction,
    );
    valid = drawn.groups;
    if (drawn.warning) warnings.push(drawn.warning);
    const trainRows = pairs
      .filter((_, i) => drawn.copy || !drawn.valid.has(i))
      .map((p) => ({ messages: p.messages }));
    const validRows = pairs.filter((_, i) => drawn.valid.has(i)).map((p) => ({ messages: p.messages }));
    files.set('train.jsonl', { text: jsonl(trainRows), rows: trainRows.length });
    files.set('valid.jsonl', { text: jsonl(validRows), rows: validRows.length });
  } else {
    used = selection.rows;
    const record = (r: VerifiedRow) => ({
      task_id: r.task.id,
      kind: r.task.kind,
      module: r.task.module,
      group: r.task.group,
      target: r.task.target,
      model: r.body.model,
      sample_id: r.body.sampleId,
      prompt: r.task.messages,
      completion: r.body.candidate,
      reward: r.body.score.reward,
      tests_passed: r.body.score.passed,
      tests_failed: r.body.score.failed,
      finish_reason: r.body.generation.finishReason,
      completion_tokens: r.body.generation.usage.completion,
      content_hash: r.body.contentHash,
      eval_fingerprint: r.body.score.evalFingerprint,
      prompt_fingerprint: r.task.promptFingerprint,
      workspace_id: r.task.workspace.id,
      workspace_commit: r.task.workspace.commit ?? '',
    });
    const trainRows = selection.rows.filter((r) => r.task.split === 'train').map(record);
    const testRows = selection.rows.filter((r) => r.task.split === 'eval').map(record);
    files.set('data/train.jsonl', { text: jsonl(trainRows), rows: trainRows.length });
    files.set('data/test.jsonl', { text: jsonl(testRows), rows: testRows.length });
    files.set('README.md', { text: datasetCard(trainRows.length, testRows.length, used), rows: 0 });
  }

  const written: ExportedFile[] = [];
  for (const [path, { text, rows }] of [...files].sort(([a], [b]) => a.localeCompare(b)))
    written.push({ path, sha256: sha256Hex(text), bytes: Buffer.byteLength(text), rows });
  const uniq = (xs: (string | null)[]) => [...new Set(xs.filter((x): x is string => x !== null))].sort();
  const manifest: Manifest = {
    format,
    generator: `vtnode ${VTNODE_VERSION}`,
    minReward,
    dataset: store.contentDigest(),
    files: written,
    counts: {
      rows: written.filter((f) => f.path.endsWith('.jsonl')).reduce((a, f) => a + f.rows, 0),
      tasks: new Set(used.map((r) => r.task.id)).size,
      groups: format === 'hf' ? new Set(used.map((r) => r.task.group)).size : groups.size,
      validGroups: valid.size,
      excluded: selection.excluded,
      missingTasks: selection.missingTasks.length,
    },
    models: uniq(used.map((r) => r.body.model)),
    commits: uniq(used.map((r) => r.task.workspace.commit)),
    workspaces: uniq(used.map((r) => r.task.workspace.id)),
    evalFingerprints: uniq(used.map((r) => r.body.score.evalFingerprint)),
    promptFingerprints: new Set(used.map((r) => r.task.promptFingerprint)).size,
    taskRows: provenance(used, rowsByHash),
    warnings,
  };
  await writeExport({
    out,
    files: new Map([
      ...[...files].map(([path, { text }]) => [path, text] as const),
      [MANIFEST, `${JSON.stringify(manifest, null, 2)}\n`],
    ]),
    ...(options.force ? { force: true } : {}),
  });
  return manifest;
}

/** Hugging Face dataset card: YAML front matter (configs, splits, features) and a short description. */
function datasetCard(trainRows: number, testRows: number, rows: VerifiedRow[]): string {
  const str = (name: string) => `    - name: ${name}\n      dtype: string\n`;
  const num = (name: string, dtype: string) => `    - name: ${name}\n      dtype: ${dtype}\n`;
  const models = [...new Set(rows.map((r) => r.body.model))].sort();
  const commits = [...new Set(rows.map((r) => r.task.workspace.commit ?? 'uncommitted'))].sort();
  return `---
# Set the license before publishing: the samples derive from the source repository's code.
license: other
license_name: set-me
pretty_name: vtnode verified samples
task_categories:
- text-generation
tags:
- code
- verified
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train.jsonl
  - split: test
    path: data/test.jsonl
dataset_info:
  features:
${str('task_id')}${str('kind')}${str('module')}${str('group')}${str('target')}${str('model')}${str('sample_id')}    - name: prompt
      list:
      - name: role
        dtype: string
      - name: content
        dtype: string
${str('completion')}${num('reward', 'float64')}${num('tests_passed', 'int64')}${num('tests_failed', 'int64')}${str('finish_reason')}${num('completion_tokens', 'int64')}${str('content_hash')}${str('eval_fingerprint')}${str('prompt_fingerprint')}${str('workspace_id')}${str('workspace_commit')}  splits:
  - name: train
    num_examples: ${trainRows}
  - name: test
    num_examples: ${testRows}
---

# vtnode verified samples

Model-written code whose unit tests were executed in a sandbox and passed (reward ≥ the export's
minimum), collected from a vtnode fleet, content-verified against signed digests, spot-audited and
de-duplicated per task. \`train\` holds tasks of the train split; \`test\` holds the eval split
(tasks whose source-sharing group never appears in train): keep it out of training.

- models: ${models.join(', ') || '(none)'}
- source commits: ${commits.join(', ') || '(none)'}
- rows: ${trainRows} train, ${testRows} test

Each row: \`prompt\` (chat messages), \`completion\` (the full file the model wrote), \`reward\`, the
test counts, and fingerprints of the prompt and of the evaluation (\`eval_fingerprint\`) it was
scored under. See manifest.json for file hashes.

**License: set \`license\` in the front matter above before publishing.**
`;
}
