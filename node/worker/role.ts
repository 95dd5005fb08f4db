import { cpus } from 'node:os';
import type { Advert } from '../../protocol/advert.ts';
import { createScoringCache } from '../../sandbox/cache.ts';
import { createCheckedScorer, type Scorer } from '../../sandbox/scorer.ts';
import type { DataDir } from '../data-dir.ts';
import { type Logger, logger } from '../logger.ts';
import type { ModelService } from '../models/service.ts';
import { createDiskGuard, type DiskLimits } from '../storage/disk-guard.ts';
import { classifyStorageError, errorText } from '../storage/errors.ts';
import type { StreamHost } from '../wire/streams.ts';
import { fetchedWorkspaceId } from '../workspace/acquire.ts';
import { workspaceId } from '../workspace/content-id.ts';
import {
  createJobExecutor,
  type FetchingWorkspaces,
  type JobExecutor,
  type StorageHealth,
} from './executor.ts';
import type { LoggedSample, SampleLog } from './sample-log.ts';

export interface WorkerRoleOptions {
  /** The node's libp2p host. */
  host: StreamHost;
  /** The node's peer id. */
  peerId: string;
  /** The node's data dir (the scoring cache lives there; its disk is watched for space). */
  dataDir: DataDir;
  /** The node's sample log (opened by the daemon before anything listens, so a bad file refuses the start). */
  sampleLog: SampleLog;
  /** Free-space thresholds of the data dir's disk (default DEFAULT_DISK_LIMITS). */
  diskLimits?: DiskLimits;
  /** Model servers. */
  models: ModelService;
  /** Workspaces this node scores against: content id → directory. */
  workspaces: ReadonlyMap<string, string>;
  /** Workspaces being fetched (--fetch-workspaces): jobs for them are taken and scored once ready. */
  fetching?: FetchingWorkspaces;
  /** Run candidates without the sandbox (trusted input only). */
  unconfined: boolean;
  /** Jobs run at once. */
  maxJobs: number;
  /** Why the node takes no new jobs now (a guest's manners), or null; running jobs go on. */
  paused?: () => string | null;
  /** Called when the advertised sandbox status or load (a full disk included) changes. */
  onChange: () => void;
  /** Called after each sample is durable. */
  onSample?: (sample: LoggedSample) => void;
  /** Decorates the checked scorer before the executor uses it (the test harness builds lying workers so). */
  wrapScorer?: (scorer: Scorer) => Scorer;
  /** Info lines per job and per verified sample (default true). */
  jobLines?: boolean;
}

export interface WorkerRole {
  readonly executor: JobExecutor;
  readonly sampleLog: SampleLog;
  /** The scorer once the sandbox self-test is over: null when this node cannot score. */
  readyScorer(): Promise<Scorer | null>;
  /** Why the node cannot log samples now (a full disk, a broken sample log), or null. */
  storageBlocked(): string | null;
  sandbox(): Advert['sandbox'];
  load(): Advert['load'];
  stop(): Promise<void>;
}

/**
 * The worker role of a node: the durable sample log, the sandbox (self-tested at start; a node
 * whose sandbox fails refuses jobs and says so in its advert), and the job executor. While the data
 * dir's disk is full, or the sample log failed (corrupt, I/O error), the node advertises no job
 * capacity and refuses jobs, so placement moves work elsewhere; a full disk resumes once space frees.
 */
export async function startWorkerRole(options: WorkerRoleOptions): Promise<WorkerRole> {
  const log = logger('vtnode:worker');
  const { sampleLog } = options;
  const storage = workerStorage(options, log);
  let sandbox: Advert['sandbox'] = { backend: 'none', ok: false, detail: 'self-test running' };
  let scorer: Scorer | null = null;
  const executor = createJobExecutor({
    host: options.host,
    peerId: options.peerId,
    models: options.models,
    get scorer() {
      return scorer;
    },
    workspaces: options.workspaces,
    ...(options.fetching ? { fetching: options.fetching } : {}),
    sampleLog,
    storage,
    maxJobs: options.maxJobs,
    ...(options.paused ? { paused: options.paused } : {}),
    jobLines: options.jobLines ?? true,
    maxScoring: Math.max(1, Math.floor(cpus().length / 2)),
    onLoadChange: options.onChange,
    ...(options.onSample ? { onSample: options.onSample } : {}),
  });
  await executor.start();
  const ready = (async () => {
    try {
      // No maxConcurrent: the uid range is host-wide (every scorer and type-check service on the host
      // draws from it, services for their whole life), so it keeps the backend's default of 256.
      const checked = await createCheckedScorer({
        unconfined: options.unconfined,
        // A fetched workspace's id is its verified manifest's (its tree lacks the withheld files).
        workspaceId: async (dir) => (await fetchedWorkspaceId(dir)) ?? workspaceId(dir),
        // Reference runs survive restarts; the self-test runs afresh at every start of the node.
        cache: { references: createScoringCache({ dir: options.dataDir.path('cache') }).references },
      });
      scorer = options.wrapScorer ? options.wrapScorer(checked) : checked;
      sandbox = { backend: scorer.confinement.name, ok: true };
      if (options.unconfined)
        log.warn('candidates run UNCONFINED on this node (--unconfined): trusted input only');
    } catch (err) {
      sandbox = { backend: 'none', ok: false, detail: (err as Error).message.slice(0, 500) };
      log.warn('this node cannot score: %s', (err as Error).message);
    }
    options.onChange();
  })();
  return {
    executor,
    sampleLog,
    sandbox: () => sandbox,
    async readyScorer() {
      await ready;
      return scorer;
    },
    load: () => executor.load(),
    storageBlocked: () => storage.blocked(),
    async stop() {
      storage.stop();
      await ready;
      await executor.stop();
      await scorer?.close();
      sampleLog.close();
    },
  };
}

/**
 * The worker's storage health: the data dir's disk guard (full until space frees), plus a sample
 * log that failed for another reason (corrupt, I/O error), which blocks the node until it restarts.
 */
export function workerStorage(
  options: Pick<WorkerRoleOptions, 'dataDir' | 'onChange' | 'diskLimits'>,
  log: Logger,
): StorageHealth & { stop(): void } {
  const guard = createDiskGuard({
    dir: options.dataDir.root,
    log,
    consequence: 'This node advertises no job capacity and refuses jobs (placement moves work elsewhere)',
    onChange: () => options.onChange(),
    ...(options.diskLimits ? { limits: options.diskLimits } : {}),
  });
  let broken: string | null = null;
  return {
    blocked() {
      if (broken) return broken;
      const disk = guard.state();
      return disk.full ? `the data dir's disk is full (${disk.reason})` : null;
    },
    failed(err, path) {
      if (guard.failed(err, path)) return true;
      const fault = classifyStorageError(err);
      if (fault !== 'corrupt' && fault !== 'not-a-database' && fault !== 'io') return false;
      if (!broken) {
        broken = `${path} failed (${errorText(err)}); stop the node and check that file`;
        log.error(`${broken}. This node refuses jobs until it restarts.`);
        options.onChange();
      }
      return true;
    },
    stop: () => guard.stop(),
  };
}
