import { cpus } from 'node:os';
import type { Advert } from '../../protocol/advert.ts';
import { createScoringCache } from '../../sandbox/cache.ts';
import { createCheckedScorer, type Scorer } from '../../sandbox/scorer.ts';
import type { DataDir } from '../data-dir.ts';
import type { DigestSigner } from '../digests/signature.ts';
import { logger } from '../logger.ts';
import type { ModelService } from '../models/service.ts';
import type { StreamHost } from '../wire/streams.ts';
import { workspaceId } from '../workspace/content-id.ts';
import { createJobExecutor, type JobExecutor } from './executor.ts';
import { type LoggedSample, openSampleLog, type SampleLog } from './sample-log.ts';

export interface WorkerRoleOptions {
  /** The node's libp2p host. */
  host: StreamHost;
  /** The node's peer id. */
  peerId: string;
  /** Signs the digest of every logged sample with the node's key. */
  signer: DigestSigner;
  /** The node's data dir (the sample log lives there). */
  dataDir: DataDir;
  /** Model servers. */
  models: ModelService;
  /** Workspaces this node scores against: content id → directory. */
  workspaces: ReadonlyMap<string, string>;
  /** Run candidates without the sandbox (trusted input only). */
  unconfined: boolean;
  /** Jobs run at once. */
  maxJobs: number;
  /** Called when the advertised sandbox status or load changes. */
  onChange: () => void;
  /** Called after each sample is durable. */
  onSample?: (sample: LoggedSample) => void;
  /** Decorates the checked scorer before the executor uses it (the test harness builds lying workers so). */
  wrapScorer?: (scorer: Scorer) => Scorer;
}

export interface WorkerRole {
  readonly executor: JobExecutor;
  readonly sampleLog: SampleLog;
  sandbox(): Advert['sandbox'];
  load(): Advert['load'];
  stop(): Promise<void>;
}

/**
 * The worker role of a node: the durable sample log, the sandbox (self-tested at start; a node
 * whose sandbox fails refuses jobs and says so in its advert), and the job executor.
 */
export async function startWorkerRole(options: WorkerRoleOptions): Promise<WorkerRole> {
  const log = logger('vtnode:worker');
  const sampleLog = openSampleLog({
    path: options.dataDir.path('samples.db'),
    origin: options.peerId,
    signer: options.signer,
  });
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
    sampleLog,
    maxJobs: options.maxJobs,
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
        workspaceId,
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
    load: () => executor.load(),
    async stop() {
      await ready;
      await executor.stop();
      await scorer?.close();
      sampleLog.close();
    },
  };
}
