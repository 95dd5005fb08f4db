import type { ServerResponse } from 'node:http';

/**
 * One server-sent event: `event:` and `id:` lines when given, the data split on newlines into one
 * `data:` line each (a data line cannot hold a newline), and the blank line that ends the event.
 */
export function sseFrame(data: string, event?: string, id?: string | number): string {
  for (const [field, value] of [
    ['event', event],
    ['id', id],
  ] as const) {
    if (value !== undefined && /[\r\n]/.test(String(value))) throw new Error(`SSE ${field} holds a newline`);
  }
  const head = `${event !== undefined ? `event: ${event}\n` : ''}${id !== undefined ? `id: ${id}\n` : ''}`;
  const body = data
    .split(/\r\n|\r|\n/)
    .map((line) => `data: ${line}\n`)
    .join('');
  return `${head}${body}\n`;
}

/** A comment line: keeps proxies and the browser from timing the stream out; no event fires. */
export const SSE_HEARTBEAT = ': heartbeat\n\n';

/** What a client's stream needs of a writable (an http.ServerResponse). */
export type SseSink = Pick<ServerResponse, 'write' | 'once'>;

/**
 * A connected page. Every update is a full snapshot, so a client that cannot keep up needs only the
 * newest: once a write finds the socket's buffer full (write() returns false), the client is behind
 * until 'drain'; meanwhile a new snapshot replaces the one waiting and heartbeats are dropped. Memory
 * per client stays bounded by the socket buffer plus one snapshot, however slow the reader.
 */
export class SseClient {
  #sink: SseSink;
  #waiting: string | null = null;
  #behind = false;
  /** Snapshots replaced before they were sent (a slow client). */
  skipped = 0;

  constructor(sink: SseSink) {
    this.#sink = sink;
  }

  /** Sends a snapshot frame now, or keeps it as the one to send once the socket drains. */
  snapshot(frame: string): void {
    if (this.#behind) {
      if (this.#waiting !== null) this.skipped++;
      this.#waiting = frame;
      return;
    }
    this.#write(frame);
  }

  /** A heartbeat, unless the client is behind (then it has data coming anyway). */
  heartbeat(): void {
    if (!this.#behind) this.#write(SSE_HEARTBEAT);
  }

  /** Whether the socket's buffer is full (the client reads slower than updates come). */
  get behind(): boolean {
    return this.#behind;
  }

  /** Bytes held for this client beyond the socket: the one waiting snapshot, if any. */
  get waitingBytes(): number {
    return this.#waiting === null ? 0 : Buffer.byteLength(this.#waiting);
  }

  #write(frame: string): void {
    if (this.#sink.write(frame)) return;
    this.#behind = true;
    this.#sink.once('drain', () => {
      this.#behind = false;
      const next = this.#waiting;
      this.#waiting = null;
      if (next !== null) this.#write(next);
    });
  }
}
