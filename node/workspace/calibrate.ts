import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Task } from '../../protocol/task.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { logger } from '../logger.ts';
import { mine } from '../tasks/mine.ts';

const log = logger('vtnode:workspace:calibrate');

export interface CalibrateWorkspaceOptions {
  /** Root of the fetched, installed workspace. */
  root: string;
  /** The node's scorer once its sandbox self-test is over (null: the node cannot score). */
  scorer: () => Promise<Scorer | null>;
  /** Stops mining and scoring. */
  signal?: AbortSignal;
}

export interface WorkspaceCalibration {
  /** The task whose reference scored 1.0 here, or null when mining found no task to try. */
  taskId: string | null;
  /** Tasks mined from the workspace. */
  mined: number;
  /** Mining and scoring, ms. */
  ms: number;
}

/** The task a calibration scores: the first `file` task in the miner's stable order, else the first. Pure. */
export function calibrationTask(tasks: readonly Task[]): Task | null {
  return tasks.find((t) => t.kind === 'file') ?? tasks[0] ?? null;
}

/**
 * The calibration sample of a fetched workspace (issue 13): mines it as `vtnode mine` would (which
 * also checks its runner and dependencies resolve) and scores one task's reference in this node's
 * sandbox, which must give 1.0. A workspace is advertised only after that: a box that cannot read
 * the tree, a dependency that did not install or a runner that does not start here would otherwise
 * make every sample this node scores for it worthless. Throws naming what failed; a workspace that
 * gives no task at all is not refused (nothing to try; jobs carry their tasks and the scorer checks
 * each task's reference before any candidate's result counts).
 */
export async function calibrateWorkspace(options: CalibrateWorkspaceOptions): Promise<WorkspaceCalibration> {
  const started = Date.now();
  const { root, signal } = options;
  const scorer = await options.scorer();
  if (!scorer) throw new Error('this node cannot score (its sandbox self-test failed): not calibrated');
  const { tasks } = await mine({ root, ...(signal ? { signal } : {}) });
  const task = calibrationTask(tasks);
  if (!task) {
    log.warn('workspace %s gave no task to calibrate with: advertised uncalibrated', root);
    return { taskId: null, mined: 0, ms: Date.now() - started };
  }
  const reference = await readFile(join(root, task.target), 'utf8');
  const r = await scorer.score({
    task,
    workspaceDir: root,
    candidate: reference,
    ...(signal ? { signal } : {}),
  });
  if (r.status === 'error') throw new Error(`calibration of ${task.id} could not score: ${r.error}`);
  if (r.reward !== 1)
    throw new Error(
      `calibration: the reference of ${task.id} scored ${r.reward} here (${r.reasons.join('; ') || 'below 1.0'})`,
    );
  return { taskId: task.id, mined: tasks.length, ms: Date.now() - started };
}
