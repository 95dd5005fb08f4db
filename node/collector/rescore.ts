import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../../protocol/canonical.ts';
import type { Task } from '../../protocol/task.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { logger } from '../logger.ts';
import { selectRows, taskFinder } from './select.ts';
import type { DatasetStore } from './store.ts';

export interface RescoreOptions {
  store: DatasetStore;
  scorer: Scorer;
  /** The new workspace: a built checkout of the platform's new version. */
  workspaceDir: string;
  /** Its identity (content id, commit, clean). */
  workspace: { id: string; commit: string | null; clean: boolean };
  /**
   * Tasks mined from the new workspace: a stored sample is scored with the new task of the same kind
   * and target (task ids change with the workspace). Without them, each old task is carried over:
   * same judge, the new workspace, the target's new content as the reference.
   */
  newTasks?: readonly Task[];
  /** Pass threshold (default: the dataset's, 1.0). */
  minReward?: number;
  /** Called after each sample. */
  onProgress?: (done: number, total: number) => void;
  signal?: AbortSignal;
}

/** A stored verified sample that no longer passes. */
export interface Broken {
  sampleId: string;
  origin: string;
  model: string;
  reward: number;
  reasons: string[];
  /** First lines of the judge's diagnostics: which APIs moved. */
  diagnostics: string;
}

export interface RescoreResult {
  workspaceId: string;
  rescored: number;
  stillPassing: number;
  /** Rows that could not be scored for infrastructure reasons: nothing recorded, run again. */
  unscored: { sampleId: string; error: string }[];
  /** Rows that no longer pass, per task id (sorted). */
  broken: Record<string, Broken[]>;
}

/**
 * Re-scores every exportable verified sample against a new workspace and records the result in the
 * dataset: rows that no longer pass leave the next export (seed §6: which APIs moved).
 */
export async function rescoreDataset(options: RescoreOptions): Promise<RescoreResult> {
  const log = logger('vtnode:collector:rescore');
  const { store, scorer } = options;
  const minReward = options.minReward ?? Number(store.getMeta('minReward') ?? 1);
  // Every verified row, including those an earlier rescore failed (they may pass again).
  const samples = store.samples({ bodyState: 'ok' }).map((s) => ({ ...s, rescore: null }));
  const { rows } = selectRows(samples, taskFinder(store.tasks(), store.taskRows()), minReward);
  const broken: Record<string, Broken[]> = {};
  const workspaceId = options.workspace.id;
  const byTarget = new Map((options.newTasks ?? []).map((t) => [`${t.kind}\n${t.target}`, t]));
  const adapted = new Map<string, Task | null>();
  /** The task as it stands in the new workspace, or null when its target is gone. */
  const taskFor = async (old: Task): Promise<Task | null> => {
    if (adapted.has(old.id)) return adapted.get(old.id)!;
    let t: Task | null = null;
    if (options.newTasks) t = byTarget.get(`${old.kind}\n${old.target}`) ?? null;
    else {
      const content = await readFile(join(options.workspaceDir, old.target), 'utf8').catch(() => null);
      if (content !== null)
        t = {
          ...old,
          workspace: { ...options.workspace, root: options.workspaceDir },
          referenceHash: `sha256:${sha256Hex(content)}`,
        };
    }
    adapted.set(old.id, t);
    return t;
  };
  let stillPassing = 0;
  let done = 0;
  const unscored: RescoreResult['unscored'] = [];
  for (const row of rows) {
    options.signal?.throwIfAborted();
    const task = await taskFor(row.task);
    const r = task
      ? await scorer.score({
          task,
          workspaceDir: options.workspaceDir,
          candidate: row.body.candidate,
          truncated: row.body.generation.truncated,
          signal: options.signal,
        })
      : {
          reward: 0,
          reasons: [`${row.task.target} (${row.task.kind} task) is gone from the new workspace`],
          diagnostics: '',
        };
    if (r.reward === null) {
      // An infrastructure failure says nothing about the sample: no rescore is recorded for it.
      unscored.push({ sampleId: row.body.sampleId, error: r.reasons.join('; ') });
      options.onProgress?.(++done, rows.length);
      continue;
    }
    store.recordRescore(row.sample.digest, { workspaceId, reward: r.reward, reasons: r.reasons });
    if (r.reward >= minReward) stillPassing++;
    else {
      log('%s (%s) no longer passes: %s', row.body.sampleId, row.task.id, r.reasons.join('; '));
      const list = broken[row.task.id] ?? [];
      broken[row.task.id] = list;
      list.push({
        sampleId: row.body.sampleId,
        origin: row.sample.digest.origin,
        model: row.body.model,
        reward: r.reward,
        reasons: r.reasons,
        diagnostics: r.diagnostics.split('\n').slice(0, 20).join('\n'),
      });
    }
    options.onProgress?.(++done, rows.length);
  }
  return {
    workspaceId,
    rescored: rows.length - unscored.length,
    stillPassing,
    unscored,
    broken: Object.fromEntries(Object.entries(broken).sort(([a], [b]) => a.localeCompare(b))),
  };
}
