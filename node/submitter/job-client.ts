import type { PeerId } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';
import {
  type JobEnd,
  type JobRequest,
  MAX_JOB_FRAME_BYTES,
  type RefusalReason,
  type SampleGenerated,
  type SampleResult,
  type SubmitterMessage,
  WorkerMessage,
} from '../../protocol/job.ts';
import { createJobSequence, JobProtocolError } from '../../protocol/job-sequence.ts';
import { ParseError } from '../../protocol/parse.ts';
import { JOB_PROTOCOL } from '../../protocol/topics.ts';
import { logger } from '../logger.ts';
import type { Framed } from '../wire/framed.ts';
import { dialFramed, type StreamHost } from '../wire/streams.ts';

const log = logger('vtnode:submitter:job');

export interface SubmitJobOptions {
  /** Cancels the job: a `cancel` is sent, and the stream is aborted if no `end` follows within `cancelGraceMs`. */
  signal?: AbortSignal;
  /** Time a cancelled job has to send its `end`, ms (default 5000). */
  cancelGraceMs?: number;
  /** Time the worker has to accept or refuse, ms (default 30 s). */
  replyTimeoutMs?: number;
  /** Opens the stream instead of dialling `peer` (a node's jobs on itself use an in-memory pair). */
  open?: (signal: AbortSignal) => Promise<Framed<WorkerMessage, SubmitterMessage>>;
}

/**
 * Why a job ended without the worker's `end`: `no-listener` when every address of the worker refused
 * the connection (nothing listens there: the process is gone), `unreachable` for other dial failures.
 */
export type LostCause =
  | 'unreachable'
  | 'no-listener'
  | 'timeout'
  | 'disconnected'
  | 'violation'
  | 'cancelled';

/** True when a dial failed because every address refused the connection (ECONNREFUSED). */
export function refusedEverywhere(err: unknown): boolean {
  const e = err as { code?: unknown; errors?: unknown[]; cause?: unknown };
  if (e?.code === 'ECONNREFUSED') return true;
  if (Array.isArray(e?.errors) && e.errors.length > 0) return e.errors.every(refusedEverywhere);
  return e?.cause !== undefined && e.cause !== err && refusedEverywhere(e.cause);
}

/** What the submitter sees of a job, in order; the last event is `refused`, `end` or `lost`. */
export type JobEvent =
  | { type: 'accepted' }
  | { type: 'refused'; reason: RefusalReason; message: string }
  | { type: 'generated'; progress: SampleGenerated }
  | { type: 'scoring'; samples: number[] }
  | { type: 'sample'; result: SampleResult }
  | { type: 'end'; end: JobEnd; missing: number[] }
  | { type: 'lost'; cause: LostCause; message: string; missing: number[] };

/**
 * Runs one job on a worker over /vtnode/job/1 and yields what happens, every worker message checked
 * against the request (order, requested indices, seeds, sample ids). Never throws for anything the
 * worker or the network does: those end in a `lost` event, with the samples still missing.
 */
export async function* submitJob(
  host: StreamHost,
  peer: PeerId | Multiaddr,
  request: JobRequest,
  options: SubmitJobOptions = {},
): AsyncGenerator<JobEvent> {
  const sequence = createJobSequence(request);
  const lost = (cause: LostCause, message: string): JobEvent => {
    log('job %s lost (%s): %s', request.jobId, cause, message);
    return { type: 'lost', cause, message, missing: sequence.missing() };
  };
  if (options.signal?.aborted) {
    yield lost('cancelled', 'cancelled before it was sent');
    return;
  }
  const stream = new AbortController();
  let wire: Framed<WorkerMessage, SubmitterMessage>;
  try {
    wire = options.open
      ? await options.open(stream.signal)
      : await dialFramed<typeof WorkerMessage, SubmitterMessage>(host, peer, JOB_PROTOCOL, {
          schema: WorkerMessage,
          maxFrameBytes: MAX_JOB_FRAME_BYTES,
          signal: stream.signal,
        });
  } catch (err) {
    const cause = refusedEverywhere(err) ? 'no-listener' : 'unreachable';
    yield lost(cause, `cannot open ${JOB_PROTOCOL} to ${peer.toString()}: ${(err as Error).message}`);
    return;
  }

  let cancelled = false;
  let graceTimer: NodeJS.Timeout | undefined;
  const onCancel = () => {
    cancelled = true;
    wire.send({ type: 'cancel', jobId: request.jobId }).catch(() => {});
    graceTimer = setTimeout(
      () => stream.abort(new Error('cancelled job did not end in time')),
      options.cancelGraceMs ?? 5000,
    );
  };
  options.signal?.addEventListener('abort', onCancel, { once: true });
  let finished = false;
  let replied = false;
  const replyTimeout = AbortSignal.timeout(options.replyTimeoutMs ?? 30_000);
  try {
    await wire.send(request);
    const first = await wire.read({ signal: replyTimeout });
    replied = true;
    for (let message = first; ; message = await wire.read()) {
      if (message === undefined) {
        yield lost(
          cancelled ? 'cancelled' : 'disconnected',
          'the worker closed the stream before ending the job',
        );
        return;
      }
      const step = sequence.next(message);
      if (step.type === 'refused')
        yield { type: 'refused', reason: step.refusal.reason, message: step.refusal.message };
      else if (step.type === 'generated') yield { type: 'generated', progress: step.progress };
      else if (step.type === 'scoring') yield { type: 'scoring', samples: step.beat.samples };
      else if (step.type === 'sample') yield { type: 'sample', result: step.result };
      else yield step;
      if (sequence.finished) {
        finished = true;
        await wire.close().catch(() => {});
        return;
      }
    }
  } catch (err) {
    wire.abort(err as Error);
    if (err instanceof JobProtocolError || err instanceof ParseError)
      yield lost('violation', (err as Error).message);
    else if (cancelled) yield lost('cancelled', (err as Error).message);
    else if (!replied && replyTimeout.aborted)
      yield lost('timeout', `no reply from the worker within ${options.replyTimeoutMs ?? 30_000} ms`);
    else yield lost('disconnected', (err as Error).message);
  } finally {
    clearTimeout(graceTimer);
    options.signal?.removeEventListener('abort', onCancel);
    // The consumer stopped early: do not leave the stream open.
    if (!finished) wire.abort(new Error('job abandoned by the submitter'));
  }
}
