import { join } from 'node:path';
import type { SignedDigest } from '../../protocol/digest.ts';
import type { Task } from '../../protocol/task.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { writePrivate } from '../data-dir.ts';
import { createDigestGossip } from '../digests/gossip.ts';
import { createLogServer, createSampleServer } from '../digests/servers.ts';
import { createTaskServer } from '../digests/task-server.ts';
import type { Host } from '../fleet/host.ts';
import { logger } from '../logger.ts';
import type { OriginCheck } from '../membership/service.ts';
import { createDiskGuard, type DiskLimits } from '../storage/disk-guard.ts';
import { storageErrorOf } from '../storage/errors.ts';
import { type Collector, type CollectorStats, createCollector, scorerAuditor } from './collector.ts';
import { DATASET_DB, type DatasetStore, openDatasetStore } from './store.ts';
import type { OriginTrust } from './trust.ts';

/** What the collector needs of a running node. */
export interface CollectorFleet {
  /** The node's libp2p host (gossipsub with StrictSign). */
  host: Host;
  fleetId: string;
  /** Peer ids of current fleet members (this node excluded or not: it is filtered out). */
  peers(): string[];
  /** Membership: digests count only from members with the worker role (none: every signed digest). */
  members?: OriginCheck;
}

export interface CollectorNodeOptions {
  fleet: CollectorFleet;
  /** The dataset dir. */
  out: string;
  /**
   * Tasks to add to the dataset (a tasks file; optional: the rows of samples collected are fetched
   * from the nodes that ran them). A v2 digest's sample uses a row only if it hashes to the signed hash.
   */
  tasks?: readonly Task[];
  /** Where `tasks` came from, recorded as each row's source in exports (default `file`). */
  tasksSource?: string;
  /** Called with a peer that provably lied (a false task row): the daemon's offence ledger. */
  onOffence?: (peer: string, why: string) => void;
  /** Reward at or above which a sample is verified (default 1). */
  minReward?: number;
  /** Share of samples re-scored, whatever their claimed reward (default 0.05). */
  auditFraction?: number;
  /** The sandbox scorer for audits; null = no audits. */
  scorer?: Scorer | null;
  /** Workspaces held: content id → dir (audits need the task's workspace). */
  workspaces?: ReadonlyMap<string, string>;
  /** Catch-up interval, ms (default 30 s). */
  catchUpIntervalMs?: number;
  /** Where to write a status snapshot (trust, counts) every few seconds, if anywhere. */
  statusFile?: string;
  /** The dataset, when the caller opened it already (before the node started listening); default: opened from `out`. */
  store?: DatasetStore;
  /** Free-space thresholds of the dataset's disk (default DEFAULT_DISK_LIMITS). */
  diskLimits?: DiskLimits;
}

/** A snapshot of a running collector, as `vtnode status` may show it. */
export interface CollectorStatus {
  dataset: string;
  contentDigest: string;
  stats: CollectorStats;
  trust: OriginTrust[];
  /** Present while nothing can be stored (the dataset's disk is full): why. */
  storage?: string;
}

export interface CollectorNode {
  collector: Collector;
  status(): CollectorStatus;
  stop(): Promise<void>;
}

/**
 * Runs the collector role on a node: digest gossip in, bodies fetched, periodic catch-up, audits;
 * and the dataset served (/vtnode/sample/2 bodies, /vtnode/log/2 every origin's signed digests), so
 * a collector that starts later converges even on origins that are gone.
 */
export async function startCollectorNode(options: CollectorNodeOptions): Promise<CollectorNode> {
  const log = logger('vtnode:collector:node');
  const { fleet } = options;
  const store = options.store ?? openDatasetStore(options.out);
  // A full disk stops fetching (the collector says so); once space frees, a catch-up gets what was missed.
  let collector: Collector | null = null;
  const guard = createDiskGuard({
    dir: store.dir,
    log,
    consequence: 'The collector stops fetching digests and bodies',
    onChange: (state) => {
      if (!state.full)
        collector
          ?.catchUp()
          .catch((err: Error) => log.warn(`catch-up after the disk freed failed: ${err.message}`));
    },
    ...(options.diskLimits ? { limits: options.diskLimits } : {}),
  });
  const storage = {
    blocked: () => {
      const s = guard.state();
      return s.full ? `the dataset's disk is full (${s.reason})` : null;
    },
    failed: (err: unknown, path: string) => guard.failed(err, path),
  };
  try {
    store.setMeta('minReward', String(options.minReward ?? 1));
    if (options.tasks?.length) store.putTasks(options.tasks, options.tasksSource ?? 'file');
  } catch (err) {
    guard.stop();
    throw storageErrorOf(join(store.dir, DATASET_DB), "the collector's dataset index", err);
  }
  const self = fleet.host.peerId.toString();
  collector = createCollector({
    host: fleet.host,
    peers: () => [...new Set(fleet.peers())].filter((p) => p !== self).sort(),
    store,
    auditFraction: options.auditFraction ?? 0.05,
    auditor: options.scorer ? scorerAuditor(options.scorer, options.workspaces ?? new Map()) : null,
    catchUpIntervalMs: options.catchUpIntervalMs ?? 30_000,
    storage,
    ...(options.onOffence ? { onOffence: options.onOffence } : {}),
  });
  // Other collectors fetch from here: the bodies held, every origin's signed digests, the verified task rows.
  const servers = [
    await createSampleServer({ host: fleet.host, source: store }),
    await createLogServer({ host: fleet.host, source: store }),
    await createTaskServer({ host: fleet.host, source: store }),
  ];
  const gossip = createDigestGossip({
    host: fleet.host,
    fleetId: fleet.fleetId,
    onDigest: (d: SignedDigest) => collector.onDigest(d),
    ...(fleet.members ? { members: fleet.members } : {}),
  });
  collector.start();

  let final: CollectorStatus | null = null;
  const status = (): CollectorStatus =>
    final ?? {
      dataset: store.dir,
      contentDigest: store.contentDigest(),
      stats: collector.stats(),
      trust: collector.trust(),
      ...(storage.blocked() ? { storage: storage.blocked()! } : {}),
    };
  let last = '';
  let lastKey = '';
  const writeStatus = async () => {
    if (!options.statusFile || final) return;
    // The content digest hashes every row: only recomputed when counts, audits or trust moved.
    const key = JSON.stringify([collector.stats(), collector.trust(), storage.blocked()]);
    if (key === lastKey) return;
    lastKey = key;
    const text = `${JSON.stringify(status(), null, 2)}\n`;
    if (text === last) return;
    last = text;
    // Atomic (temp file + rename): `vtnode status`, the demo and tests read it while it is rewritten.
    await writePrivate(options.statusFile, text).catch((err: Error) =>
      log.warn(`writing status failed: ${err.message}`),
    );
  };
  const timer = setInterval(() => void writeStatus(), 1000);
  void writeStatus();

  let stopping: Promise<void> | null = null;
  return {
    collector,
    status,
    stop() {
      stopping ??= (async () => {
        clearInterval(timer);
        guard.stop();
        gossip.stop();
        await collector.stop();
        for (const server of servers) await server.stop().catch(() => {});
        await writeStatus();
        final = status();
        store.close();
      })();
      return stopping;
    },
  };
}
