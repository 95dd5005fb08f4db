import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';

const rate = z.number().min(0).max(1);
/** Injectable faults, drawn per chat request from a seeded sequence (in this order: drop, hang, error, garbage, slow). */
export const Faults = z.strictObject({
  /** Share of requests whose connection is destroyed without an answer. */
  dropRate: rate.default(0),
  /** Share of requests that never get an answer (until the client gives up or the server closes). */
  hangRate: rate.default(0),
  /** Share of requests answered with HTTP 500. */
  errorRate: rate.default(0),
  /** Share of requests answered with HTTP 200 and a body that is no chat completion (probes still answer). */
  garbageRate: rate.default(0),
  /** Share of requests that run `slowFactor` times slower. */
  slowRate: rate.default(0),
  /** Slow-down of a slow request. */
  slowFactor: z.number().min(1).max(10_000).default(10),
  /** Seed of the fault sequence. */
  seed: z.number().int().default(1),
});
export type Faults = z.infer<typeof Faults>;
export type FaultsInput = z.input<typeof Faults>;

/** What one draw decides for a request: a fault that ends it, or whether it runs `factor` times slower. */
export type FaultDraw = { end: 'drop' | 'hang' | 'error' | 'garbage' } | { slow: boolean; factor: number };

/** The fault for a request whose draw from the seeded sequence is `x` in [0, 1): the rates stack in order. */
export function drawFault(faults: Faults, x: number): FaultDraw {
  let edge = faults.dropRate;
  if (x < edge) return { end: 'drop' };
  edge += faults.hangRate;
  if (x < edge) return { end: 'hang' };
  edge += faults.errorRate;
  if (x < edge) return { end: 'error' };
  edge += faults.garbageRate;
  if (x < edge) return { end: 'garbage' };
  edge += faults.slowRate;
  return x < edge ? { slow: true, factor: faults.slowFactor } : { slow: false, factor: 1 };
}

/** Options of {@link inflictFault}. */
export interface InflictOptions {
  /** The request the fault hits. */
  req: IncomingMessage;
  /** Its response. */
  res: ServerResponse;
  /** Answers with an error status in the request's API's shape. */
  fail: (status: number, message: string, type?: string) => void;
}

/** Carries out a fault that ends the request: no answer, a hang, a 500, or a truncated body. */
export function inflictFault(end: Extract<FaultDraw, { end: unknown }>['end'], o: InflictOptions): void {
  switch (end) {
    case 'drop':
      o.req.socket.destroy();
      return;
    case 'hang':
      return; // never answered; the emulator's close() destroys the socket
    case 'error':
      o.fail(500, 'emulated server error (vtnode model-server fault injection)', 'server_error');
      return;
    case 'garbage':
      o.res.writeHead(200, { 'content-type': 'application/json' });
      o.res.end('{"object":"chat.completion","choices":[{"message":{"con');
      return;
  }
}
