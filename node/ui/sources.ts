import type { CollectorStatus } from '../collector/node.ts';
import { buildReport } from '../collector/report.ts';
import type { StoredSample } from '../collector/store.ts';
import { logger } from '../logger.ts';
import type { FleetStatus } from '../status.ts';
import type { CampaignStatus } from '../submitter/service.ts';
import { buildSnapshot, type DatasetFigures, datasetFigures, uiDataset } from './snapshot.ts';
import type { Snapshot, UiDataset } from './snapshot-schema.ts';

/** A collector's dataset, as the web view reads it. */
export interface DatasetSource {
  /** The collector's status (counts, trust). */
  status(): CollectorStatus;
  /** Every sample of the dataset (read again only when the counts moved, at most every `everyMs`). */
  samples(): StoredSample[];
  /** Reward at or above which a sample passes (the dataset's setting). */
  minReward: number;
}

export interface SnapshotSourceOptions {
  /** The node's fleet status (`vtnode status`). */
  status: () => FleetStatus;
  /** Campaigns this node submitted, newest first. */
  campaigns: () => CampaignStatus[];
  /** The dataset, when this node collects (set once the collector runs). */
  dataset?: () => DatasetSource | null;
  /** Least time between two reads of the dataset's samples, ms (default 5000). */
  everyMs?: number;
  /** The clock (tests). */
  now?: () => number;
}

/**
 * What the web view's server calls to build a snapshot: the daemon's status and campaigns each time,
 * the dataset's samples (histogram, growth, pass@k) only when its counts moved and at most every
 * `everyMs`, so a large dataset is not read every second.
 */
export function snapshotSource(options: SnapshotSourceOptions): () => Snapshot {
  const log = logger('vtnode:ui');
  const now = options.now ?? Date.now;
  const everyMs = options.everyMs ?? 5000;
  let figures: DatasetFigures | null = null;
  let figuresKey = '';
  let readAt = 0;
  let last: UiDataset | null = null;
  let lastCampaigns: CampaignStatus[] = [];

  const readDataset = (source: DatasetSource, status: CollectorStatus): UiDataset => {
    const key = JSON.stringify([status.stats.digests, status.stats.bodies, status.stats.audited]);
    if (!figures || (key !== figuresKey && now() - readAt >= everyMs)) {
      const samples = source.samples();
      figures = datasetFigures(samples, buildReport(samples, { minReward: source.minReward }).models);
      figuresKey = key;
      readAt = now();
    }
    return uiDataset(status.dataset, status.stats, figures);
  };

  return () => {
    const status = options.status();
    const source = options.dataset?.() ?? null;
    let collector: CollectorStatus | null = null;
    if (source) {
      try {
        collector = source.status();
        last = readDataset(source, collector);
      } catch (err) {
        // The dataset closes as the node stops: the last figures stay.
        log(`reading the dataset failed: ${(err as Error).message}`);
      }
    }
    try {
      lastCampaigns = options.campaigns();
    } catch (err) {
      // The campaign store closes as the node stops: the last figures stay.
      log(`reading campaigns failed: ${(err as Error).message}`);
    }
    return buildSnapshot({
      status,
      campaigns: lastCampaigns,
      dataset: last,
      trust: collector?.trust ?? [],
      now: now(),
    });
  };
}
