import type { ConnectionGater, MultiaddrConnection } from '@libp2p/interface';
import { logger } from '../logger.ts';
import { createInboundGuard, type InboundGuard, type InboundGuardOptions } from './inbound-guard.ts';

export interface InboundGaterOptions extends InboundGuardOptions {
  /** How often handshakes in progress are checked for having closed, ms (default 250). */
  sweepMs?: number;
}

export interface InboundGater {
  /** The libp2p connection gater. */
  readonly gater: ConnectionGater;
  /** The admission state (tests and status read it). */
  readonly guard: InboundGuard;
  /** Stops the sweep timer. */
  stop(): void;
}

interface Tracked {
  id: number;
  address: string;
  maConn: MultiaddrConnection;
}

/**
 * Wires the inbound guard into libp2p: `denyInboundConnection` admits or refuses a raw connection
 * by its remote address before any handshake byte is read; a connection that reaches
 * `denyInboundEncryptedConnection` has proved the fleet key. A sweep notices handshakes that closed
 * before that (failed: timed out, garbage, another fleet's key), which count as strikes; when an
 * address gets banned, its handshakes still in progress are aborted at once.
 *
 * libp2p hands the gater copies of the connection object at each stage; the `timeline` object is
 * shared by all of them, so it is the key.
 */
export function createInboundGater(options: InboundGaterOptions = {}): InboundGater {
  const log = logger('vtnode:fleet:gater');
  const guard = createInboundGuard(options);
  const tracked = new Map<object, Tracked>();
  const byId = new Map<number, Tracked>();

  const sweep = () => {
    const now = Date.now();
    for (const [key, t] of tracked) {
      if (t.maConn.timeline.close === undefined) continue;
      tracked.delete(key);
      byId.delete(t.id);
      const closure = guard.closed(t.id, now);
      if (!closure.banned) continue;
      const until = guard.bannedUntil(t.address, now);
      log.warn(
        `${t.address}: too many failed handshakes; refused until ${new Date(until ?? now).toISOString()}`,
      );
      for (const id of closure.abort) byId.get(id)?.maConn.abort(new Error(`${t.address} is banned`));
    }
  };
  const timer = setInterval(sweep, options.sweepMs ?? 250);
  timer.unref();

  const gater: ConnectionGater = {
    denyInboundConnection(maConn) {
      sweep();
      const address = maConn.remoteAddr.nodeAddress().address;
      const admission = guard.open(address, Date.now());
      if (!admission.admit) {
        log('refused a connection from %s: %s', address, admission.reason);
        return true;
      }
      const t = { id: admission.id, address, maConn };
      tracked.set(maConn.timeline, t);
      byId.set(t.id, t);
      return false;
    },
    denyInboundEncryptedConnection(_peer, maConn) {
      const t = tracked.get(maConn.timeline);
      if (t) {
        tracked.delete(maConn.timeline);
        byId.delete(t.id);
        guard.established(t.id, Date.now());
      }
      return false;
    },
  };
  return { gater, guard, stop: () => clearInterval(timer) };
}
