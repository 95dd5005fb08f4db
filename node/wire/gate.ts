/**
 * The membership gate of a libp2p host's vtnode streams. A daemon installs one on its host; every
 * handleFramed handler and dialFramed dial on that host then passes through it (a host without a
 * gate, as in unit tests of the wire, is open). Kept apart from the membership wiring so the wire
 * helpers do not depend on it.
 */
export interface StreamGate {
  /**
   * Resolves once `peer` may use `protocol` in `direction` (waiting briefly for a certificate that
   * is on its way); throws an Error saying why not.
   */
  check(
    peer: string,
    protocol: string,
    direction: 'inbound' | 'outbound',
    signal?: AbortSignal,
  ): Promise<void>;
}

const gates = new WeakMap<object, StreamGate>();

/** Installs `gate` on `host`; returns a function that removes it. */
export function installStreamGate(host: object, gate: StreamGate): () => void {
  gates.set(host, gate);
  return () => {
    if (gates.get(host) === gate) gates.delete(host);
  };
}

/** The gate installed on `host`, if any. */
export function streamGate(host: object): StreamGate | undefined {
  return gates.get(host);
}
