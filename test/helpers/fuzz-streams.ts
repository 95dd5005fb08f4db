// Raw stream I/O for protocol fuzzing: a case's bytes written as they are on a fresh stream (no
// framing, no schema), a frame dripped a byte at a time, a stream opened and left silent; each
// reports how the node ended the stream.
import type { PeerId } from '@libp2p/interface';
import { sleep } from '../../node/async/sleep.ts';
import type { Host } from '../../node/fleet/host.ts';

/**
 * How the node ended a stream: it answered (sent bytes), closed it cleanly, reset it; `refused`:
 * the stream could not be opened (connection refused or closed, protocol refused); `hung`: none of
 * these within the bound (the stream was then aborted here).
 */
export type StreamOutcome = 'answered' | 'closed' | 'reset' | 'refused' | 'hung';

/** Reads the stream's source to its end; what the node did. */
async function drain(source: AsyncIterable<{ byteLength: number }>): Promise<StreamOutcome> {
  let got = 0;
  try {
    for await (const chunk of source) got += chunk.byteLength;
    return got > 0 ? 'answered' : 'closed';
  } catch {
    return got > 0 ? 'answered' : 'reset';
  }
}

/** Resolves `hung` after `ms` unless `p` settles first. */
function within(p: Promise<StreamOutcome>, ms: number): Promise<StreamOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<StreamOutcome>((resolve) => {
    timer = setTimeout(() => resolve('hung'), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Writes `bytes` on a fresh `protocol` stream to `peer`, closes our side, and waits for the node's end. */
export async function sendRaw(
  host: Host,
  peer: PeerId,
  protocol: string,
  bytes: Uint8Array,
  boundMs: number,
): Promise<StreamOutcome> {
  let stream: Awaited<ReturnType<Host['dialProtocol']>>;
  try {
    stream = await host.dialProtocol(peer, protocol, { signal: AbortSignal.timeout(boundMs) });
  } catch {
    return 'refused';
  }
  const ended = drain(stream.source);
  void stream.sink([bytes]).catch(() => {});
  const outcome = await within(ended, boundMs);
  if (outcome === 'hung') stream.abort(new Error('fuzz: the node did not end the stream'));
  return outcome;
}

/**
 * Slowloris on a fresh `protocol` stream: `bytes` dripped one per `everyMs` (none when `bytes` is
 * empty: a stream opened and left silent), our side never closed. Resolves with how the node ended
 * it, or `hung` after `boundMs`.
 */
export async function slowloris(
  host: Host,
  peer: PeerId,
  protocol: string,
  bytes: Uint8Array,
  everyMs: number,
  boundMs: number,
): Promise<StreamOutcome> {
  let stream: Awaited<ReturnType<Host['dialProtocol']>>;
  try {
    stream = await host.dialProtocol(peer, protocol, { signal: AbortSignal.timeout(10_000) });
  } catch {
    return 'refused';
  }
  let over = false;
  const ended = drain(stream.source).finally(() => {
    over = true;
  });
  const drip = async function* () {
    for (const b of bytes) {
      if (over) return;
      yield Uint8Array.of(b);
      await sleep(everyMs);
    }
    // Never close: wait for the node to end the stream.
    await ended;
  };
  void stream.sink(drip()).catch(() => {});
  const outcome = await within(ended, boundMs);
  over = true;
  if (outcome === 'hung') stream.abort(new Error('fuzz: the node did not end the stream'));
  return outcome;
}
