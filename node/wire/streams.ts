import type { Connection, Libp2p, PeerId } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';
import type { z } from 'zod';
import { ParseError } from '../../protocol/parse.ts';
import { logger } from '../logger.ts';
import { type Framed, FrameError, framed } from './framed.ts';
import { streamGate } from './gate.ts';
import type { OffenceLedger } from './offences.ts';

const log = logger('vtnode:wire');

/** The part of a libp2p node the wire helpers use. */
export type StreamHost = Pick<Libp2p, 'peerId' | 'handle' | 'unhandle' | 'dialProtocol'>;

export interface DialFramedOptions<In extends z.ZodType> {
  /** Schema of the messages the remote sends. */
  schema: In;
  /** Largest frame either way, bytes. */
  maxFrameBytes?: number;
  /** Aborts the dial and, later, the stream. */
  signal?: AbortSignal;
  /** Skips the host's membership gate (only the protocols that establish membership). */
  ungated?: boolean;
}

/** Opens `protocol` to a peer (by peer id, or a multiaddr ending in /p2p/<id>) as framed messages. */
export async function dialFramed<In extends z.ZodType, Out = unknown>(
  host: StreamHost,
  peer: PeerId | Multiaddr,
  protocol: string,
  options: DialFramedOptions<In>,
): Promise<Framed<z.output<In>, Out>> {
  const name = 'getPeerId' in peer ? (peer.getPeerId() ?? peer.toString()) : peer.toString();
  const gate = options.ungated ? undefined : streamGate(host);
  if (gate) await gate.check(name, protocol, 'outbound', options.signal);
  const stream = await host.dialProtocol(peer, protocol, { signal: options.signal });
  return framed<In, Out>(stream, {
    schema: options.schema,
    peer: name,
    protocol,
    maxFrameBytes: options.maxFrameBytes,
    signal: options.signal,
  });
}

export interface HandleFramedOptions<In extends z.ZodType> {
  /** Schema of the messages the remote sends. */
  schema: In;
  /** Largest frame either way, bytes. */
  maxFrameBytes?: number;
  /** Most concurrent inbound streams of this protocol per connection (libp2p default 32). */
  maxInboundStreams?: number;
  /** Skips the host's membership gate (only the protocols that establish membership). */
  ungated?: boolean;
}

/** How a host treats peers that misuse its stream protocols (see guardStreams). */
export interface StreamGuard {
  /** Offences per peer; a banned peer's streams are refused. */
  ledger: OffenceLedger;
  /** Called once when an offence bans a peer (close its connections). */
  onBan(peer: string, until: number, why: string): void;
  /** Time an inbound stream has to deliver its first frame, ms (default 30 s). */
  firstFrameTimeoutMs?: number;
  /** The clock (default Date.now). */
  now?: () => number;
}

const guards = new WeakMap<object, StreamGuard>();

/**
 * Makes every handleFramed protocol of `host` (registered before or after) count a peer's
 * malformed, oversized or truncated frames and streams that never send their request, and refuse
 * the streams of a banned peer.
 */
export function guardStreams(host: StreamHost, guard: StreamGuard): void {
  guards.set(host, guard);
}

/** An error that says the remote broke the protocol (not a network failure or our own fault): what it did, else null. */
export function offence(err: unknown): string | null {
  if (err instanceof ParseError) return 'a malformed message';
  if (err instanceof FrameError && (err.code === 'too-large' || err.code === 'truncated'))
    return `a ${err.code} frame`;
  if (err instanceof FirstFrameTimeout) return 'a stream without its request';
  return null;
}

class FirstFrameTimeout extends Error {
  constructor(protocol: string, ms: number) {
    super(`${protocol}: no request within ${ms} ms`);
    this.name = 'FirstFrameTimeout';
  }
}

/** Aborts `wire` unless its first read completes within `ms`. */
function firstFrameDeadline<In, Out>(wire: Framed<In, Out>, ms: number, onTimeout: (err: Error) => void) {
  const timer = setTimeout(() => {
    const err = new FirstFrameTimeout(wire.protocol, ms);
    onTimeout(err);
    wire.abort(err);
  }, ms);
  timer.unref();
  const settle = <T>(p: Promise<T>): Promise<T> => p.finally(() => clearTimeout(timer));
  const read = wire.read.bind(wire);
  const expect = wire.expect.bind(wire);
  return Object.assign(wire, {
    read: (o?: Parameters<typeof read>[0]) => settle(read(o)),
    expect: (what: string, o?: Parameters<typeof expect>[1]) => settle(expect(what, o)),
  });
}

/** Handles one inbound framed stream. */
export type FramedHandler<In, Out> = (stream: Framed<In, Out>, connection: Connection) => Promise<void>;

/**
 * Registers a handler for `protocol` whose streams arrive framed. When the host has a membership
 * gate (node/wire/gate.ts), a stream reaches the handler only once the gate admits its peer; a
 * refused one is reset. A handler that throws gets its stream aborted and the error logged: a bad
 * peer never takes the node down. A handler that returns without closing gets its stream closed.
 */
export async function handleFramed<In extends z.ZodType, Out = unknown>(
  host: StreamHost,
  protocol: string,
  handler: FramedHandler<z.output<In>, Out>,
  options: HandleFramedOptions<In>,
): Promise<void> {
  await host.handle(
    protocol,
    ({ stream, connection }) => {
      const peer = connection.remotePeer.toString();
      const guard = guards.get(host);
      const now = guard?.now ?? Date.now;
      if (guard?.ledger.banned(peer, now())) {
        stream.abort(new Error(`${peer} is banned for misusing the stream protocols`));
        return;
      }
      let wire = framed<In, Out>(stream, {
        schema: options.schema,
        peer,
        protocol,
        maxFrameBytes: options.maxFrameBytes,
      });
      let timedOut: Error | null = null;
      if (guard) wire = firstFrameDeadline(wire, guard.firstFrameTimeoutMs ?? 30_000, (e) => (timedOut = e));
      const gate = options.ungated ? undefined : streamGate(host);
      const admitted = gate ? gate.check(peer, protocol, 'inbound') : Promise.resolve();
      admitted
        .then(() => handler(wire, connection))
        .then(() => wire.close())
        .catch((err: Error) => {
          log.warn('%s stream from %s failed: %s', protocol, peer, err.message);
          wire.abort(err);
          const why = offence(timedOut ?? err);
          if (!guard || !why) return;
          const { fresh, until } = guard.ledger.record(peer, `${why} on ${protocol}`, now());
          if (fresh) {
            log.warn('%s banned until %s: %s on %s', peer, new Date(until).toISOString(), why, protocol);
            guard.onBan(peer, until, `${why} on ${protocol}`);
          }
        });
    },
    { maxInboundStreams: options.maxInboundStreams },
  );
}
