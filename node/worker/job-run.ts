import type {
  JobFailure,
  JobRequest,
  SampleGenerated,
  SampleResult,
  SubmitterMessage,
  WorkerLoad,
  WorkerMessage,
} from '../../protocol/job.ts';
import { logger } from '../logger.ts';
import type { Framed } from '../wire/framed.ts';
import { offence } from '../wire/streams.ts';

type Wire = Framed<SubmitterMessage, WorkerMessage>;

const log = logger('vtnode:worker:job');

export interface JobRunOptions {
  /** The job as first requested. */
  job: JobRequest;
  /** This worker's peer id (named in `accepted`). */
  worker: string;
  /** The `sample` message of index `index` if that sample is already durable in the log, else undefined. */
  logged: (index: number) => SampleResult | undefined;
  /** Time the job keeps running without a stream, ms; then `onAbandoned`. */
  leaseMs: number;
  /** The submitter cancelled the job (a `cancel` on the attached stream). */
  onCancel: () => void;
  /** No stream for `leaseMs`: the submitter is gone. */
  onAbandoned: () => void;
  /** The worker's load now, sent with the `end` (the submitter sees the freed slot at once); omitted when unset. */
  load?: () => WorkerLoad;
}

/** Why a job ended without all its samples, for the `end`. */
export interface JobFailureEnd {
  reason: JobFailure;
  message: string;
}

/**
 * One running job and the stream its results go to. The work does not depend on the stream: when
 * the stream breaks, the job keeps running (samples stay durable in the log) for `leaseMs`; a new
 * stream for the same job (the submitter re-attaching) takes over, gets `accepted`, the samples it
 * asks for that are already scored, then the rest as they come, then the `end`.
 */
export interface JobRun {
  /**
   * Attaches a stream: the first one, a re-attach, or a new job of the submitter for the same
   * samples (`jobId`: the id that stream uses). Resolves when that stream is done with; rejects
   * when the submitter broke the protocol on it (a malformed or oversized frame: the job goes on).
   */
  attach(wire: Wire, samples: readonly number[], jobId?: string, beats?: boolean): Promise<void>;
  /** Progress: a sample is generated and queued for scoring. */
  generated(message: SampleGenerated): void;
  /** A heartbeat: these samples are being scored or wait for a sandbox (sent only where the request said `beats`). */
  scoring(samples: readonly number[]): void;
  /** A sample is scored and durable. */
  scored(result: SampleResult): void;
  /** The job is over; the attached stream (if any) gets its `end`. */
  finish(failure: JobFailureEnd | null): void;
  /** True while a stream is attached. */
  readonly attached: boolean;
}

interface Attachment {
  wire: Wire;
  /** The job id this stream knows the job by (the submitter may have placed the same work again). */
  jobId: string;
  /** Samples this stream asked for. */
  wanted: Set<number>;
  /** Samples whose result is queued on this stream. */
  reported: Set<number>;
  /** Samples whose `generated` is queued on this stream. */
  announced: Set<number>;
  /** The submitter on this stream takes `scoring` heartbeats. */
  beats: boolean;
  /** Sends, in order: every message of one stream goes through this chain. */
  queue: Promise<void>;
  broken: boolean;
  ended: boolean;
  /** Stops the reader once the stream is done with. */
  stopReading: AbortController;
  /** What the submitter sent that broke the protocol (a malformed or oversized frame), if it did. */
  offence: Error | null;
  done: () => void;
  over: Promise<void>;
}

export function createJobRun(options: JobRunOptions): JobRun {
  const { job } = options;
  let current: Attachment | null = null;
  let outcome: { failure: JobFailureEnd | null } | null = null;
  let orphaned: NodeJS.Timeout | null = null;

  const release = (a: Attachment) => {
    a.stopReading.abort();
    a.done();
  };

  /** Queues a message on `a`, under the job id `a` knows; a failed send detaches the stream (the job goes on). */
  const enqueue = (a: Attachment, message: WorkerMessage): void => {
    const own = { ...message, jobId: a.jobId };
    a.queue = a.queue.then(async () => {
      if (a.broken) return;
      try {
        await a.wire.send(own);
      } catch (err) {
        a.broken = true;
        detach(a, err as Error);
      }
    });
  };

  const detach = (a: Attachment, err: Error): void => {
    release(a);
    if (current !== a) return;
    current = null;
    if (outcome) return;
    log('job %s: stream lost (%s); the job goes on for %d ms', job.jobId, err.message, options.leaseMs);
    orphaned = setTimeout(() => {
      orphaned = null;
      if (outcome || current) return;
      log.warn(`job ${job.jobId}: no submitter for ${options.leaseMs} ms; giving it up`);
      options.onAbandoned();
    }, options.leaseMs);
  };

  /** Queues the results of every wanted sample already durable and not yet reported on `a`. */
  const replay = (a: Attachment): void => {
    for (const index of [...a.wanted].sort((x, y) => x - y)) {
      if (a.reported.has(index)) continue;
      const result = options.logged(index);
      if (!result) continue;
      a.reported.add(index);
      enqueue(a, result);
    }
  };

  const endOn = (a: Attachment): void => {
    if (a.ended || !outcome) return;
    a.ended = true;
    replay(a);
    const missing = [...a.wanted].filter((i) => !a.reported.has(i));
    const failure =
      outcome.failure ??
      (missing.length > 0
        ? { reason: 'internal' as const, message: `samples ${missing.join(', ')} were not produced` }
        : null);
    const load = options.load ? { load: options.load() } : {};
    enqueue(
      a,
      failure
        ? {
            type: 'end',
            jobId: a.jobId,
            status: 'failed',
            reason: failure.reason,
            message: failure.message,
            ...load,
          }
        : { type: 'end', jobId: a.jobId, status: 'done', ...load },
    );
    a.queue = a.queue
      .then(() => (a.broken ? undefined : a.wire.closeWrite()))
      .catch(() => {})
      .finally(() => release(a));
  };

  /**
   * Reads the submitter's side. Only a `cancel` cancels: libp2p ends a stream whose connection dropped
   * just as it ends one closed on purpose, so a close before the `end` detaches, like a failure.
   */
  const watch = (a: Attachment): void => {
    void (async () => {
      try {
        for (;;) {
          const message = await a.wire.read({ signal: a.stopReading.signal });
          if (!message) throw new Error('the submitter closed the stream before the end');
          if (message.type !== 'cancel') continue;
          if (current === a && !outcome) options.onCancel();
          return;
        }
      } catch (err) {
        // Garbage mid-job detaches the stream like a failure, and `attach` then rejects with it so
        // the stream guard counts the offence (node/wire/streams.ts).
        if (offence(err)) a.offence = err as Error;
        if (!a.ended) detach(a, err as Error);
      }
    })();
  };

  return {
    attach(wire, samples, jobId = job.jobId, beats = false) {
      let done!: () => void;
      const over = new Promise<void>((resolve) => {
        done = resolve;
      });
      const a: Attachment = {
        wire,
        jobId,
        wanted: new Set(samples),
        reported: new Set(),
        announced: new Set(),
        beats,
        queue: Promise.resolve(),
        broken: false,
        ended: false,
        stopReading: new AbortController(),
        offence: null,
        done,
        over,
      };
      enqueue(a, { type: 'accepted', jobId: a.jobId, worker: options.worker });
      const previous = current;
      current = a;
      if (orphaned) clearTimeout(orphaned);
      orphaned = null;
      if (previous) {
        // A newer stream for the job: the submitter gave the old one up.
        release(previous);
        previous.broken = true;
        previous.wire.abort(new Error('superseded by a newer stream for the job'));
      }
      replay(a);
      if (outcome) endOn(a);
      else watch(a);
      return over.then(() => {
        if (a.offence) throw a.offence;
      });
    },
    generated(message) {
      const a = current;
      if (!a?.wanted.has(message.index) || a.reported.has(message.index) || a.announced.has(message.index))
        return;
      a.announced.add(message.index);
      enqueue(a, message);
    },
    scoring(samples) {
      const a = current;
      if (!a?.beats || a.ended) return;
      const beat = samples.filter((i) => a.wanted.has(i) && !a.reported.has(i)).sort((x, y) => x - y);
      if (beat.length > 0) enqueue(a, { type: 'scoring', jobId: a.jobId, samples: beat });
    },
    scored(result) {
      const a = current;
      if (!a?.wanted.has(result.index) || a.reported.has(result.index)) return;
      a.reported.add(result.index);
      enqueue(a, result);
    },
    finish(failure) {
      if (outcome) return;
      outcome = { failure };
      if (orphaned) clearTimeout(orphaned);
      orphaned = null;
      if (current) endOn(current);
    },
    get attached() {
      return current !== null;
    },
  };
}
