/** Errors of the model-server layer. Every one names the server it concerns. */

/** A model server answered with something vtnode cannot use (bad JSON, a bad field, an error status). */
export class ModelServerError extends Error {
  /** Base URL of the server. */
  readonly url: string;
  /** True when trying again later may succeed (connection errors, timeouts, 5xx). */
  readonly retryable: boolean;
  /** HTTP status, when there was one. */
  readonly status: number | null;
  /** True when the server did not answer in time (slow, not necessarily down). */
  readonly timedOut: boolean;

  constructor(
    url: string,
    message: string,
    options: { retryable?: boolean; status?: number | null; timedOut?: boolean; cause?: unknown } = {},
  ) {
    super(`${url}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ModelServerError';
    this.url = url;
    this.retryable = options.retryable ?? false;
    this.status = options.status ?? null;
    this.timedOut = options.timedOut ?? false;
  }
}

/** The per-server queue is full: the job was refused before any request was sent. */
export class QueueFullError extends ModelServerError {
  constructor(url: string, wanted: number, queued: number, limit: number) {
    super(
      url,
      `queue full: ${queued} requests queued or running, limit ${limit}, this job needs ${wanted} more`,
      { retryable: true },
    );
    this.name = 'QueueFullError';
  }
}

/** The caller's AbortSignal fired. */
export class AbortedError extends Error {
  constructor(message = 'aborted') {
    super(message);
    this.name = 'AbortError';
  }
}
