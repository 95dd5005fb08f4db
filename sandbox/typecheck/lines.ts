import type { Readable } from 'node:stream';

/** Lines of a stream, read as they arrive; a line longer than the cap marks the stream as overflowed. */
export interface LineReader {
  /** The oldest unread complete line, if any. */
  shift(): string | undefined;
  /** True once the stream ended (no more lines will come after those buffered). */
  readonly ended: boolean;
  /** True when an unterminated line grew past the cap (the reader stops buffering). */
  readonly overflowed: boolean;
  /** Resolves at the next line, end or overflow. */
  changed(): Promise<void>;
}

/** Reads `stream` as UTF-8 lines of at most `maxChars` characters. */
export function readLines(stream: Readable, maxChars: number): LineReader {
  const lines: string[] = [];
  let partial = '';
  let ended = false;
  let overflowed = false;
  let wake: (() => void) | null = null;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    if (overflowed) return;
    partial += chunk;
    for (let i = partial.indexOf('\n'); i >= 0; i = partial.indexOf('\n')) {
      lines.push(partial.slice(0, i));
      partial = partial.slice(i + 1);
    }
    if (partial.length > maxChars) {
      overflowed = true;
      partial = '';
    }
    notify();
  });
  const end = () => {
    ended = true;
    notify();
  };
  stream.once('end', end);
  stream.once('close', end);
  stream.once('error', end);
  return {
    shift: () => lines.shift(),
    get ended() {
      return ended;
    },
    get overflowed() {
      return overflowed;
    },
    changed: () =>
      lines.length > 0 || ended || overflowed
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            const previous = wake;
            wake = () => {
              previous?.();
              resolve();
            };
          }),
  };
}
