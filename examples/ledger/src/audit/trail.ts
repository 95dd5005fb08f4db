/** One recorded action. */
export interface AuditEvent {
  readonly at: number;
  readonly actor: string;
  readonly action: string;
}

export interface AuditTrailOptions {
  /** Milliseconds since the epoch; Date.now by default. */
  now?: () => number;
  /** Oldest events are dropped beyond this many; unlimited by default. */
  capacity?: number;
}

/** An in-memory audit trail that stamps each event with the clock's time. */
export class AuditTrail {
  readonly #events: AuditEvent[] = [];
  readonly #now: () => number;
  readonly #capacity: number;

  constructor(options: AuditTrailOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#capacity = options.capacity ?? Number.POSITIVE_INFINITY;
  }

  record(actor: string, action: string): AuditEvent {
    const event = Object.freeze({ at: this.#now(), actor, action });
    this.#events.push(event);
    if (this.#events.length > this.#capacity) this.#events.shift();
    return event;
  }

  /** Events recorded in the last `ms` milliseconds, oldest first. */
  recent(ms: number): AuditEvent[] {
    const cutoff = this.#now() - ms;
    return this.#events.filter((e) => e.at > cutoff);
  }

  /** Events by `actor`, oldest first. */
  by(actor: string): AuditEvent[] {
    return this.#events.filter((e) => e.actor === actor);
  }

  get size(): number {
    return this.#events.length;
  }
}
