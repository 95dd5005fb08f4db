import type { Digest } from '../../protocol/digest.ts';
import type { SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
import { resolveAll } from './claims.ts';
import { normalisedHash, type StoredSample } from './store.ts';

/** Why a stored sample is not a training row. */
export type Exclusion =
  | 'not-verified'
  | 'no-body'
  | 'no-task'
  | 'quarantined'
  | 'audit-failed'
  | 'rescore-failed'
  | 'same-sample-other-origin'
  | 'disputed'
  | 'duplicate';

/** A verified, audited-or-trusted, de-duplicated sample with its task: one training row. */
export interface VerifiedRow {
  task: Task;
  sample: StoredSample;
  body: SampleBody;
}

export interface Selection {
  /** Rows in a fixed order: task id, model, sample id. */
  rows: VerifiedRow[];
  /** Failed samples with bodies (for repair exports), same order. */
  failed: VerifiedRow[];
  /** Samples left out, by reason. */
  excluded: Record<Exclusion, number>;
  /** Task ids samples answer that the dataset has no task for (kept, flagged, never exported). */
  missingTasks: string[];
}

/**
 * A sample's task: a map by task id (the rows of v1 digests, which name no hash), or a lookup by
 * digest (see taskFinder: a v2 digest's task is the row its signed hash names, or none).
 */
export type Tasks = ReadonlyMap<string, Task> | ((digest: Digest) => Task | undefined);

/**
 * The lookup of a dataset's tasks: a v2 digest gets only the row whose hash it signed (a row of the
 * same id with other content is not its task), and only if that row is of the task the digest names;
 * a v1 digest the row of its task id.
 */
export function taskFinder(
  byId: ReadonlyMap<string, Task>,
  byHash: ReadonlyMap<string, { task: Task }>,
): (digest: Digest) => Task | undefined {
  return (d) => {
    if (d.taskHash === undefined) return byId.get(d.taskId);
    const task = byHash.get(d.taskHash)?.task;
    return task?.id === d.taskId ? task : undefined;
  };
}

const finderOf = (tasks: Tasks) => (typeof tasks === 'function' ? tasks : (d: Digest) => tasks.get(d.taskId));

const order = (a: StoredSample, b: StoredSample) =>
  a.digest.taskId.localeCompare(b.digest.taskId) ||
  a.digest.model.localeCompare(b.digest.model) ||
  a.digest.sampleId.localeCompare(b.digest.sampleId) ||
  a.digest.origin.localeCompare(b.digest.origin);

/** Why a claim is not a training row (before de-duplication), or null. */
function exclusion(s: StoredSample, task: Task | undefined, minReward: number): Exclusion | null {
  if (!s.body) return 'no-body';
  if (!task) return 'no-task';
  if (s.digest.reward < minReward) return 'not-verified';
  if (s.audit === 'failed') return 'audit-failed';
  if (s.quarantined) return 'quarantined';
  if (s.rescore && s.rescore.reward < minReward) return 'rescore-failed';
  return null;
}

/**
 * Picks the training rows of a dataset, deterministically (the same samples give the same rows
 * whatever order they arrived in): one per sample id, claims of several origins resolved by
 * claims.ts (agreeing claims are one row; claims that contest each other's reward or candidate are
 * left out as `disputed` until audits settle them); then verified (reward ≥ minReward) with a
 * verified body, not quarantined, not failed by an audit or by the latest rescore, with a known
 * task; one per task and whitespace-normalised text.
 */
export function selectRows(samples: readonly StoredSample[], tasks: Tasks, minReward: number): Selection {
  const taskOf = finderOf(tasks);
  const excluded: Record<Exclusion, number> = {
    'not-verified': 0,
    'no-body': 0,
    'no-task': 0,
    quarantined: 0,
    'audit-failed': 0,
    'rescore-failed': 0,
    'same-sample-other-origin': 0,
    disputed: 0,
    duplicate: 0,
  };
  const missing = new Set<string>();
  for (const s of samples) if (!taskOf(s.digest)) missing.add(s.digest.taskId);
  const chosen: StoredSample[] = [];
  for (const r of resolveAll(samples)) {
    if (r.chosen && r.exportable) {
      chosen.push(r.chosen);
      excluded['same-sample-other-origin'] += r.claims.length - 1;
    } else if (r.disputed) excluded.disputed += r.claims.length;
    else for (const c of r.claims) excluded[exclusion(c, taskOf(c.digest), minReward) ?? 'no-body']++;
  }
  const rows: VerifiedRow[] = [];
  const failed: VerifiedRow[] = [];
  const seenText = new Set<string>();
  const seenFailedText = new Set<string>();
  for (const s of chosen.sort(order)) {
    const task = taskOf(s.digest);
    const why = exclusion(s, task, minReward);
    if (why) excluded[why]++;
    if (!task || !s.body) continue;
    const key = `${s.digest.taskId}\n${normalisedHash(s.body.candidate)}`;
    if (why === 'not-verified') {
      if (!s.quarantined && s.audit !== 'failed' && !seenFailedText.has(key)) {
        seenFailedText.add(key);
        failed.push({ task, sample: s, body: s.body });
      }
      continue;
    }
    if (why) continue;
    if (seenText.has(key)) {
      excluded.duplicate++;
      continue;
    }
    seenText.add(key);
    rows.push({ task, sample: s, body: s.body });
  }
  return { rows, failed, excluded, missingTasks: [...missing].sort() };
}
