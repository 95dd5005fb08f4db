import type { Connection, Libp2p, PeerId } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';
import type { z } from 'zod';
import { logger } from '../logger.ts';
import { type Framed, framed } from './framed.ts';
import { streamGate } from './gate.ts';

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
      const wire = framed<In, Out>(stream, {
        schema: options.schema,
        peer,
        protocol,
        maxFrameBytes: options.maxFrameBytes,
      });
      const gate = options.ungated ? undefined : streamGate(host);
      const admitted = gate ? gate.check(peer, protocol, 'inbound') : Promise.resolve();
      admitted
        .then(() => handler(wire, connection))
        .then(() => wire.close())
        .catch((err: Error) => {
          log.warn('%s stream from %s failed: %s', protocol, peer, err.message);
          wire.abort(err);
        });
    },
    { maxInboundStreams: options.maxInboundStreams },
  );
}
