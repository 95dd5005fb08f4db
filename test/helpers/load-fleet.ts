// Parts shared by the load bench (bench/load.ts) and the multi-host drills (test/faults/drills.test.ts):
// a collector's command line, what its dataset holds, and when the fleet's workers are ready.

import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { DATASET_DB } from '../../node/collector/store.ts';
import type { FleetStatus } from '../../node/status.ts';

/** Fast adverts so tests see joins and departures within seconds. */
const ADVERT_INTERVAL = '1s';

export interface CollectorArgsOptions {
  /** The collector's data dir. */
  dataDir: string;
  /** The fleet's join token; omitted: the fleet saved in the data dir (a restart). */
  token?: string;
  /** The dataset dir (`--out`). */
  out: string;
  /** The tasks file (exports and audits need the tasks). */
  tasksFile: string;
  /** `--listen` address; omitted: the default (all interfaces, port 7461). */
  listen?: string;
  /** Catch-up interval (default 10s). */
  catchUp?: string;
}

/** `vtnode collect` arguments of a collector without audits (a fast-scoring fleet has nothing to audit with). */
export function collectorArgs(o: CollectorArgsOptions): string[] {
  return [
    'collect',
    '--data-dir',
    o.dataDir,
    ...(o.token ? ['--token', o.token] : []),
    ...(o.listen ? ['--listen', o.listen] : []),
    '--advert-interval',
    ADVERT_INTERVAL,
    '--out',
    o.out,
    '--tasks',
    o.tasksFile,
    '--audit-fraction',
    '0',
    '--catch-up-interval',
    o.catchUp ?? '10s',
  ];
}

/** One verified-against-digest sample of a dataset: its id, content and reward. */
export interface DatasetSample {
  sampleId: string;
  taskId: string;
  contentHash: string;
  reward: number;
}

/**
 * Every row with a verified body in a collector's dataset (read-only, while it runs), by sample id;
 * a sample held by several origins (redone elsewhere) appears once per origin.
 */
export function datasetSamples(dataset: string): DatasetSample[] {
  const db = new DatabaseSync(join(dataset, DATASET_DB), { readOnly: true });
  try {
    const rows = db
      .prepare(
        "SELECT sample_id AS sampleId, task_id AS taskId, content_hash AS contentHash, reward FROM samples WHERE body_state = 'ok' ORDER BY sample_id, origin",
      )
      .all() as unknown as DatasetSample[];
    return rows.map((r) => ({
      sampleId: r.sampleId,
      taskId: r.taskId,
      contentHash: r.contentHash,
      reward: r.reward,
    }));
  } finally {
    db.close();
  }
}

/** Distinct sample ids with a verified-against-digest body in a collector's dataset. */
export function datasetIds(dataset: string): string[] {
  return [...new Set(datasetSamples(dataset).map((s) => s.sampleId))];
}

/** How many of `workers` (peer ids) a status shows serving all `models` with a working sandbox. */
export function readyWorkers(status: FleetStatus, workers: ReadonlySet<string>, models: number): number {
  return status.nodes.filter(
    (x) => workers.has(x.peerId) && x.models.length === models && x.sandbox.ok && x.workspaces.length > 0,
  ).length;
}
