// A scripted worker end of /vtnode/job/1 for submitter tests: the job goes to a handler the test
// writes, through a JobChannel whose every outgoing message is checked by the job sequence (so a
// test worker cannot break the protocol by accident). The node's real worker is
// node/worker/executor.ts.

import { logger } from '../../node/logger.ts';
import type { Framed } from '../../node/wire/framed.ts';
import { handleFramed, type StreamHost } from '../../node/wire/streams.ts';
import {
  type JobFailure,
  type JobRequest,
  MAX_JOB_FRAME_BYTES,
  type RefusalReason,
  type SampleGenerated,
  type SampleResult,
  SubmitterMessage,
  WorkerMessage,
} from '../../protocol/job.ts';
import { createJobSequence } from '../../protocol/job-sequence.ts';
import { ParseError, parseWith } from '../../protocol/parse.ts';
import { JOB_PROTOCOL } from '../../protocol/topics.ts';

const log = logger('vtnode:test:job-worker');

/** One job as the worker's executor sees it. Every message it sends is checked before it leaves. */
export interface JobChannel {
  /** The parsed request (its `submitter` is the stream's remote peer). */
  readonly request: JobRequest;
  /** Peer id of the submitter. */
  readonly peer: string;
  /** Fires when the submitter cancels the job or its stream goes away. */
  readonly signal: AbortSignal;
  /** Takes the job; samples may follow. */
  accept(): Promise<void>;
  /** Declines the job; the channel is finished. */
  refuse(reason: RefusalReason, message: string): Promise<void>;
  /** Optional progress: sample `index` is generated and waits for scoring. */
  generated(progress: Omit<SampleGenerated, 'type' | 'jobId'>): Promise<void>;
  /** Reports a scored sample. Append it to the sample log first. */
  sample(result: Omit<SampleResult, 'type' | 'jobId'>): Promise<void>;
  /** Ends the job: every requested sample was reported. */
  done(): Promise<void>;
  /** Ends the job without some of its samples. */
  fail(reason: JobFailure, message: string): Promise<void>;
}

/** Runs one job; returning without ending it ends it as failed (`internal`). */
export type JobHandler = (job: JobChannel) => Promise<void>;

export interface JobServerOptions {
  /** Runs each accepted-or-refused job. */
  handler: JobHandler;
  /** Time a submitter has to send its job after opening the stream, ms (default 10 s). */
  requestTimeoutMs?: number;
  /** Most concurrent job streams per connection (default 32). */
  maxInboundStreams?: number;
}

/** Serves /vtnode/job/1 on a host: parses requests, refuses bad ones, and hands good ones to the handler. */
export async function serveJobs(
  host: StreamHost,
  options: JobServerOptions,
): Promise<{ stop(): Promise<void> }> {
  await handleFramed<typeof SubmitterMessage, WorkerMessage>(
    host,
    JOB_PROTOCOL,
    (wire, connection) => runJob(wire, connection.remotePeer.toString(), host.peerId.toString(), options),
    {
      schema: SubmitterMessage,
      maxFrameBytes: MAX_JOB_FRAME_BYTES,
      maxInboundStreams: options.maxInboundStreams,
    },
  );
  return { stop: () => host.unhandle(JOB_PROTOCOL) };
}

async function runJob(
  wire: Framed<SubmitterMessage, WorkerMessage>,
  peer: string,
  self: string,
  options: JobServerOptions,
) {
  const badRequest = (jobId: string, message: string) =>
    wire.send({ type: 'refused', jobId, reason: 'bad-request', message: message.slice(0, 2000) });
  let first: SubmitterMessage;
  try {
    first = await wire.expect('a job', { signal: AbortSignal.timeout(options.requestTimeoutMs ?? 10_000) });
  } catch (err) {
    if (!(err instanceof ParseError)) throw err;
    log.warn('bad job request from %s: %s', peer, err.message);
    await badRequest('', err.message);
    return;
  }
  if (first.type !== 'job') {
    await badRequest(first.jobId, `expected a job, got ${first.type}`);
    return;
  }
  if (first.submitter !== peer) {
    await badRequest(
      first.jobId,
      `submitter field says ${first.submitter}, but the stream comes from ${peer}`,
    );
    return;
  }
  const request = first;
  const sequence = createJobSequence(request);
  const cancel = new AbortController();

  // Listen for a cancel (or the submitter going away) while the job runs.
  void (async () => {
    try {
      for (;;) {
        const message = await wire.read();
        if (message === undefined) return; // the submitter closed its side; results may still flow
        if (message.type === 'cancel' && message.jobId === request.jobId)
          cancel.abort(new Error('cancelled by the submitter'));
      }
    } catch (err) {
      cancel.abort(err);
    }
  })();

  const send = async (message: WorkerMessage) => {
    sequence.next(parseWith(WorkerMessage, message, `job ${request.jobId} message to ${peer}`));
    await wire.send(message);
  };
  const jobId = request.jobId;
  const channel: JobChannel = {
    request,
    peer,
    signal: cancel.signal,
    accept: () => send({ type: 'accepted', jobId, worker: self }),
    refuse: (reason, message) => send({ type: 'refused', jobId, reason, message: message.slice(0, 2000) }),
    generated: (progress) => send({ type: 'generated', jobId, ...progress }),
    sample: (result) => send({ type: 'sample', jobId, ...result }),
    done: () => send({ type: 'end', jobId, status: 'done' }),
    fail: (reason, message) =>
      send({ type: 'end', jobId, status: 'failed', reason, message: message.slice(0, 2000) }),
  };
  let failure = 'the worker stopped the job without ending it';
  try {
    await options.handler(channel);
  } catch (err) {
    log.warn('job %s from %s failed: %s', jobId, peer, (err as Error).message);
    failure = `the worker failed: ${(err as Error).message}`;
  }
  if (sequence.finished) return;
  // Nothing promised yet: abort the stream (the submitter sees the job lost); else say it failed.
  if (!sequence.accepted) throw new Error(`job ${jobId}: ${failure} before accepting or refusing it`);
  await channel.fail(cancel.signal.aborted ? 'cancelled' : 'internal', failure);
}
