import type { z } from 'zod';
import { parseWith } from '../../protocol/parse.ts';
import { type Framed, FrameError, type WaitOptions } from './framed.ts';

interface Half {
  queue: unknown[];
  waiters: ((v: IteratorResult<unknown>) => void)[];
  ended: boolean;
  error: Error | null;
}

function push(half: Half, value: unknown): void {
  const w = half.waiters.shift();
  if (w) w({ value, done: false });
  else half.queue.push(value);
}

function end(half: Half, error: Error | null): void {
  if (half.ended) return;
  half.ended = true;
  half.error = error;
  for (const w of half.waiters.splice(0)) w({ value: undefined, done: true });
}

function side<In extends z.ZodType, Out>(
  inbox: Half,
  outbox: Half,
  schema: In,
  peer: string,
  protocol: string,
): Framed<z.output<In>, Out> {
  let count = 0;
  const read = async (options?: WaitOptions): Promise<z.output<In> | undefined> => {
    if (inbox.queue.length === 0) {
      if (inbox.ended) {
        if (inbox.error) throw new FrameError('reset', peer, protocol, inbox.error.message);
        return undefined;
      }
      const next = await new Promise<IteratorResult<unknown>>((resolve, reject) => {
        inbox.waiters.push(resolve);
        options?.signal?.addEventListener(
          'abort',
          () => reject(new FrameError('aborted', peer, protocol, 'aborted')),
          {
            once: true,
          },
        );
      });
      if (next.done) return read();
      inbox.queue.unshift(next.value);
    }
    count += 1;
    return parseWith(schema, inbox.queue.shift(), `${protocol} message ${count} from ${peer}`);
  };
  const self: Framed<z.output<In>, Out> = {
    peer,
    protocol,
    async send(message) {
      if (outbox.ended) throw new FrameError('closed', peer, protocol, 'the stream is closed');
      // Copy through JSON, as the wire would: no shared objects between the two sides.
      push(outbox, JSON.parse(JSON.stringify(message)));
    },
    read,
    async expect(what, options) {
      const m = await read(options);
      if (m === undefined) throw new FrameError('ended', peer, protocol, `the stream ended before ${what}`);
      return m;
    },
    [Symbol.asyncIterator]() {
      return {
        next: async () => {
          const value = await read();
          return value === undefined ? { value: undefined, done: true } : { value, done: false };
        },
      };
    },
    async closeWrite() {
      end(outbox, null);
    },
    async close() {
      end(outbox, null);
      end(inbox, null);
    },
    abort(err) {
      end(outbox, err);
      end(inbox, err);
    },
  };
  return self;
}

/**
 * Two connected in-memory framed endpoints: what one side sends, the other reads, parsed with its
 * schema as if it had crossed the wire. A node uses it to run a job on itself (libp2p does not dial
 * its own peer id), so a fleet of one takes the same code path as a fleet of many.
 */
export function localPair<A extends z.ZodType, B extends z.ZodType>(options: {
  /** Schema of what the first endpoint reads (what the second sends). */
  aReads: A;
  /** Schema of what the second endpoint reads (what the first sends). */
  bReads: B;
  /** Protocol id, named in errors. */
  protocol: string;
  /** This node's peer id. */
  peer: string;
}): [Framed<z.output<A>, z.input<B>>, Framed<z.output<B>, z.input<A>>] {
  const toA: Half = { queue: [], waiters: [], ended: false, error: null };
  const toB: Half = { queue: [], waiters: [], ended: false, error: null };
  return [
    side<A, z.input<B>>(toA, toB, options.aReads, options.peer, options.protocol),
    side<B, z.input<A>>(toB, toA, options.bReads, options.peer, options.protocol),
  ];
}
