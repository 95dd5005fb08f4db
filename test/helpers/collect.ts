import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CollectorStatus } from '../../node/collector/node.ts';
import { type DatasetSample, datasetSamples } from './load-fleet.ts';
import { notYet, pollFor } from './poll.ts';

/** The snapshot a collector writes to `collector.json` in its data dir, or null before the first one. */
export async function collectorStatus(dataDir: string): Promise<CollectorStatus | null> {
  try {
    return JSON.parse(await readFile(join(dataDir, 'collector.json'), 'utf8')) as CollectorStatus;
  } catch {
    return null;
  }
}

export interface CollectorHoldsOptions {
  /** The collector's data dir (it writes collector.json there). */
  dataDir: string;
  /** Its dataset dir (`--out`). */
  dataset: string;
  /** Sample ids it must hold with a verified body: planned (from task, model, index, seed), never read from it. */
  want: ReadonlySet<string>;
  /** What is waited for, in the timeout message. */
  what: string;
  /** Longest wait, ms. */
  timeoutMs: number;
  /** Pause between reads, ms (default 500). */
  pauseMs?: number;
}

/** How far a collector is from holding `want`: null once it holds it all, else what it lacks. */
export async function collectorLacks(
  o: Pick<CollectorHoldsOptions, 'dataDir' | 'dataset' | 'want'>,
): Promise<{
  rows: DatasetSample[];
  lack: null | { pending: number | null; missing: string[]; held: number };
}> {
  const status = await collectorStatus(o.dataDir);
  const rows = datasetSamples(o.dataset);
  const held = new Set(rows.map((r) => r.sampleId));
  const missing = [...o.want].filter((id) => !held.has(id));
  const pending = status?.stats.pending ?? null;
  return { rows, lack: pending === 0 && missing.length === 0 ? null : { pending, missing, held: held.size } };
}

/**
 * Waits until a collector is final for `want`: its collector.json says no body is pending AND its dataset
 * holds every wanted sample id with a verified body (a campaign is over when the workers have scored, not
 * when the last body reached the collectors). Resolves with the dataset's rows then; a timeout says how
 * many bodies were pending and which ids were missing.
 */
export function collectorHolds(o: CollectorHoldsOptions): Promise<DatasetSample[]> {
  return pollFor(
    async () => {
      const { rows, lack } = await collectorLacks(o);
      if (!lack) return rows;
      return notYet({
        pending: lack.pending,
        held: lack.held,
        missing: lack.missing.slice(0, 10),
        of: lack.missing.length,
      });
    },
    { what: o.what, timeoutMs: o.timeoutMs, pauseMs: o.pauseMs ?? 500 },
  );
}
