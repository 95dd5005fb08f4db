import type { Stream } from '@libp2p/interface';
import { decode, encode } from 'it-length-prefixed';
import type { z } from 'zod';
import { ParseError, parseJsonWith } from '../../protocol/parse.ts';
import { logger } from '../logger.ts';
import { Outbox } from './outbox.ts';

const log = logger('vtnode:wire');

/** Default largest frame, bytes. */
export const DEFAULT_MAX_FRAME_BYTES = 1024 * 1024;
/** How long a graceful close may take before the stream is aborted instead, ms. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 5000;

/** Why a framed stream failed. */
export type FrameErrorCode = 'too-large' | 'truncated' | 'ended' | 'reset' | 'aborted' | 'closed';

/** A stream-level failure (not a bad message: those are ParseErrors), naming the peer and protocol. */
export class FrameError extends Error {
  readonly code: FrameErrorCode;
  readonly peer: string;
  readonly protocol: string;
  constructor(code: FrameErrorCode, peer: string, protocol: string, detail: string, cause?: unknown) {
    super(`${protocol} with ${peer}: ${detail}`, cause === undefined ? undefined : { cause });
    this.name = 'FrameError';
    this.code = code;
    this.peer = peer;
    this.protocol = protocol;
  }
}

export interface FramedOptions<In extends z.ZodType> {
  /** Schema every received message is parsed with. */
  schema: In;
  /** Remote peer id, named in errors. */
  peer: string;
  /** Protocol id, named in errors. */
  protocol: string;
  /** Largest frame accepted or sent, bytes of JSON (default 1 MiB). */
  maxFrameBytes?: number;
  /** Aborts the stream in both directions when it fires. */
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** Gives up the wait; since a half-read frame cannot be resumed, this aborts the stream. */
  signal?: AbortSignal;
}

/**
 * Length-prefixed JSON messages over a libp2p stream: `send` writes one message per frame,
 * `read` returns the next received message parsed with the schema (a ParseError naming the peer,
 * protocol, message number and field when it does not fit; the stream stays usable, so the caller
 * may answer it), or undefined once the remote closed its side cleanly. Stream failures are
 * FrameErrors: an oversized frame (`too-large`, reading ends), a close mid-frame (`truncated`), a
 * reset by the remote (`reset`), an abort here (`aborted`).
 */
export interface Framed<In, Out> {
  /** Sends one message; resolves once the stream has taken it (backpressure). */
  send(message: Out, options?: WaitOptions): Promise<void>;
  /** The next message, or undefined when the remote closed its write side. */
  read(options?: WaitOptions): Promise<In | undefined>;
  /** The next message; a FrameError (`ended`) saying `what` was expected if the remote closed instead. */
  expect(what: string, options?: WaitOptions): Promise<In>;
  /** Reads messages until the remote closes. */
  [Symbol.asyncIterator](): AsyncIterator<In>;
  /** Ends our write side after queued messages are sent; the remote's read returns undefined. */
  closeWrite(options?: WaitOptions): Promise<void>;
  /** Closes both sides gracefully; aborts the stream if that takes longer than the signal (default 5 s) allows. */
  close(options?: WaitOptions): Promise<void>;
  /** Resets the stream at once; the remote sees a `reset`. */
  abort(err: Error): void;
  readonly peer: string;
  readonly protocol: string;
}

/** Wraps a libp2p stream as framed, schema-checked JSON messages. */
export function framed<In extends z.ZodType, Out = unknown>(
  stream: Stream,
  options: FramedOptions<In>,
): Framed<z.output<In>, Out> {
  const { schema, peer, protocol } = options;
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const fail = (code: FrameErrorCode, detail: string, cause?: unknown) =>
    new FrameError(code, peer, protocol, detail, cause);

  const outbox = new Outbox();
  let sinkError: Error | null = null;
  const sinkDone = stream.sink(outbox).catch((err: Error) => {
    sinkError = err;
    outbox.return();
  });

  const frames = decode(stream.source, { maxDataLength: maxFrameBytes });
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let received = 0;
  let readDone = false;
  let reading = false;
  let aborted: FrameError | null = null;

  const abort = (err: Error) => {
    if (aborted) return;
    aborted = err instanceof FrameError ? err : fail('aborted', err.message, err);
    log('aborting %s with %s: %s', protocol, peer, err.message);
    outbox.return();
    stream.abort(aborted);
    release();
  };

  // The stream-wide signal is listened to until both directions are over.
  const onAbort = () => abort(fail('aborted', `aborted (${String(options.signal?.reason ?? 'signal')})`));
  let writeEnded = false;
  function release() {
    if (aborted || (writeEnded && readDone)) options.signal?.removeEventListener('abort', onAbort);
  }
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  void sinkDone.finally(() => {
    writeEnded = true;
    release();
  });

  /** Races `promise` with `signal`; a fired signal aborts the stream. */
  const wait = async <T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> => {
    if (!signal) return promise;
    if (signal.aborted) {
      abort(fail('aborted', 'wait aborted'));
      throw aborted;
    }
    let onWaitAbort: (() => void) | undefined;
    const gaveUp = new Promise<never>((_, reject) => {
      onWaitAbort = () => {
        abort(fail('aborted', `wait aborted (${String(signal.reason ?? 'signal')})`));
        reject(aborted);
      };
      signal.addEventListener('abort', onWaitAbort, { once: true });
    });
    try {
      return await Promise.race([promise, gaveUp]);
    } finally {
      signal.removeEventListener('abort', onWaitAbort!);
    }
  };

  const translate = (err: unknown): Error => {
    if (aborted) return aborted;
    if (err instanceof FrameError) return err;
    const e = err as Error;
    switch (e?.name) {
      case 'InvalidDataLengthError':
      case 'InvalidDataLengthLengthError':
        return fail('too-large', `received a frame larger than ${maxFrameBytes} bytes`, e);
      case 'UnexpectedEOFError':
        return fail('truncated', 'stream ended in the middle of a frame', e);
      case 'StreamResetError':
        return fail('reset', 'stream reset by the remote', e);
      default:
        return fail('closed', `stream failed: ${e?.message ?? String(err)}`, e);
    }
  };

  const read = async (opts: WaitOptions = {}): Promise<z.output<In> | undefined> => {
    if (aborted) throw aborted;
    if (readDone) return undefined;
    if (reading) throw new Error(`${protocol} with ${peer}: read() called while another read is waiting`);
    reading = true;
    let result: IteratorResult<{ subarray(): Uint8Array }>;
    try {
      result = await wait(frames.next(), opts.signal);
    } catch (err) {
      readDone = true;
      release();
      throw translate(err);
    } finally {
      reading = false;
    }
    if (result.done) {
      readDone = true;
      release();
      return undefined;
    }
    received++;
    const input = `${protocol} message #${received} from ${peer}`;
    let text: string;
    try {
      text = decoder.decode(result.value.subarray());
    } catch {
      throw new ParseError(input, [{ path: '', message: 'not UTF-8 text' }]);
    }
    return parseJsonWith(schema, text, input);
  };

  return {
    peer,
    protocol,
    async send(message, opts = {}) {
      if (aborted) throw aborted;
      if (sinkError) throw translate(sinkError);
      if (stream.writeStatus === 'closing' || stream.writeStatus === 'closed' || stream.status !== 'open')
        throw fail('closed', `stream is closed for writing (${stream.status}, write ${stream.writeStatus})`);
      const bytes = new TextEncoder().encode(JSON.stringify(message));
      if (bytes.byteLength > maxFrameBytes)
        throw fail(
          'too-large',
          `refusing to send a ${bytes.byteLength}-byte message (limit ${maxFrameBytes} bytes)`,
        );
      const frame = encode.single(bytes, { maxDataLength: maxFrameBytes }).subarray();
      try {
        await wait(outbox.push(frame), opts.signal);
      } catch (err) {
        throw translate(sinkError ?? err);
      }
    },
    read,
    async expect(what, opts) {
      const message = await read(opts);
      if (message === undefined) throw fail('ended', `remote closed the stream; expected ${what}`);
      return message;
    },
    [Symbol.asyncIterator]() {
      return {
        async next() {
          const value = await read();
          return value === undefined ? { done: true, value: undefined } : { done: false, value };
        },
      };
    },
    async closeWrite(opts = {}) {
      outbox.end();
      await wait(sinkDone, opts.signal);
      if (sinkError && !aborted) throw translate(sinkError);
    },
    async close(opts = {}) {
      const signal = opts.signal ?? AbortSignal.timeout(DEFAULT_CLOSE_TIMEOUT_MS);
      outbox.end();
      await wait(sinkDone, signal);
      try {
        await wait(stream.close({ signal }), signal);
      } catch (err) {
        throw translate(err);
      }
    },
    abort,
  };
}
