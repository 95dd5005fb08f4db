/** Thrown to senders whose frames were still queued when the outbox closed. */
export class OutboxClosedError extends Error {
  constructor() {
    super('stream closed before the message was sent');
    this.name = 'OutboxClosedError';
  }
}

interface Queued {
  data: Uint8Array;
  resolve(): void;
  reject(err: Error): void;
}

/**
 * The source a stream's sink reads from: frames pushed by `push`, each push resolving once the
 * sink has taken its frame (the sink takes the next only after the muxer accepted the previous,
 * so a sender waits for a slow peer). `end` finishes after the queue drains; `return` (the sink's
 * abort) finishes at once and rejects what is still queued.
 */
export class Outbox implements AsyncIterableIterator<Uint8Array> {
  private queue: Queued[] = [];
  private waiter: ((result: IteratorResult<Uint8Array>) => void) | null = null;
  private ending = false;
  private closed = false;

  push(data: Uint8Array): Promise<void> {
    if (this.closed || this.ending) return Promise.reject(new OutboxClosedError());
    return new Promise<void>((resolve, reject) => {
      if (this.waiter) {
        const waiter = this.waiter;
        this.waiter = null;
        resolve();
        waiter({ done: false, value: data });
      } else this.queue.push({ data, resolve, reject });
    });
  }

  /** No more frames: the iterator finishes once the queued ones are taken. */
  end(): void {
    this.ending = true;
    if (this.queue.length === 0) this.finish();
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    const item = this.queue.shift();
    if (item) {
      item.resolve();
      if (this.ending && this.queue.length === 0) this.closed = true;
      return Promise.resolve({ done: false, value: item.data });
    }
    if (this.closed || this.ending) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  return(): Promise<IteratorResult<Uint8Array>> {
    this.ending = true;
    this.finish();
    for (const item of this.queue.splice(0)) item.reject(new OutboxClosedError());
    return Promise.resolve({ done: true, value: undefined });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private finish(): void {
    this.closed = true;
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.({ done: true, value: undefined });
  }
}
