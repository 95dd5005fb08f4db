import type { SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
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

const order = (a: StoredSample, b: StoredSample) =>
  a.digest.taskId.localeCompare(b.digest.taskId) ||
  a.digest.model.localeCompare(b.digest.model) ||
  a.digest.sampleId.localeCompare(b.digest.sampleId) ||
  a.digest.origin.localeCompare(b.digest.origin);

/**
 * Picks the training rows of a dataset, deterministically (the same samples give the same rows
 * whatever order they arrived in): verified (reward ≥ minReward) with a verified body, not
 * quarantined, not failed by an audit or by the latest rescore, with a known task; one per sample id
 * (the first origin by id when two workers produced it); one per task and whitespace-normalised text.
 */
export function selectRows(
  samples: readonly StoredSample[],
  tasks: ReadonlyMap<string, Task>,
  minReward: number,
): Selection {
  const excluded: Record<Exclusion, number> = {
    'not-verified': 0,
    'no-body': 0,
    'no-task': 0,
    quarantined: 0,
    'audit-failed': 0,
    'rescore-failed': 0,
    'same-sample-other-origin': 0,
    duplicate: 0,
  };
  const missing = new Set<string>();
  const rows: VerifiedRow[] = [];
  const failed: VerifiedRow[] = [];
  const seenIds = new Set<string>();
  const seenText = new Set<string>();
  const seenFailedText = new Set<string>();
  for (const s of [...samples].sort(order)) {
    const d = s.digest;
    const task = tasks.get(d.taskId);
    if (!task) missing.add(d.taskId);
    if (!s.body) {
      excluded['no-body']++;
      continue;
    }
    if (!task) {
      excluded['no-task']++;
      continue;
    }
    if (d.reward < minReward) {
      excluded['not-verified']++;
      const key = `${d.taskId}\n${normalisedHash(s.body.candidate)}`;
      if (!s.quarantined && s.audit !== 'failed' && !seenFailedText.has(key)) {
        seenFailedText.add(key);
        failed.push({ task, sample: s, body: s.body });
      }
      continue;
    }
    if (s.audit === 'failed') {
      excluded['audit-failed']++;
      continue;
    }
    if (s.quarantined) {
      excluded.quarantined++;
      continue;
    }
    if (s.rescore && s.rescore.reward < minReward) {
      excluded['rescore-failed']++;
      continue;
    }
    if (seenIds.has(d.sampleId)) {
      excluded['same-sample-other-origin']++;
      continue;
    }
    seenIds.add(d.sampleId);
    const key = `${d.taskId}\n${normalisedHash(s.body.candidate)}`;
    if (seenText.has(key)) {
      excluded.duplicate++;
      continue;
    }
    seenText.add(key);
    rows.push({ task, sample: s, body: s.body });
  }
  return { rows, failed, excluded, missingTasks: [...missing].sort() };
}
