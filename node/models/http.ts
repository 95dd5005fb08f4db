import type { z } from 'zod';
import { ParseError, parseWith } from '../../protocol/parse.ts';
import { AbortedError, ModelServerError } from './errors.ts';

export interface GetJsonOptions {
  /** Milliseconds before the request is abandoned. */
  timeoutMs: number;
  /** Aborts the request. */
  signal?: AbortSignal | undefined;
  /** fetch implementation (tests). */
  fetch?: typeof fetch | undefined;
}

/** What a GET returned: a 2xx JSON body with its headers, or `absent` for 404/405/501 and non-JSON pages. */
export type JsonResponse =
  | { found: true; body: unknown; headers: Headers }
  | { found: false; status: number; notJson?: boolean };

/** Joins a server base URL and a path without doubling slashes. */
export function endpoint(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}${path}`;
}

/**
 * GET `url` and read its JSON. Connection failures, timeouts (`timedOut`) and 5xx throw a retryable
 * ModelServerError naming the URL; a 404 (and other "no such endpoint" answers, or an HTML page)
 * resolve to `{ found: false }` so probing can try the next kind.
 */
export async function getJson(base: string, path: string, options: GetJsonOptions): Promise<JsonResponse> {
  const url = endpoint(base, path);
  const signals = [AbortSignal.timeout(options.timeoutMs)];
  if (options.signal) signals.push(options.signal);
  const signal = AbortSignal.any(signals);
  let res: Response;
  let text: string;
  try {
    res = await (options.fetch ?? fetch)(url, { signal, headers: { accept: 'application/json' } });
    text = await res.text();
  } catch (err) {
    if (options.signal?.aborted) throw new AbortedError(`GET ${url} aborted`);
    const timedOut = (err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError';
    const detail = timedOut ? `no answer within ${options.timeoutMs} ms` : describeFetchError(err);
    throw new ModelServerError(base, `GET ${path}: ${detail}`, { retryable: true, timedOut, cause: err });
  }
  if (res.status >= 500)
    throw new ModelServerError(base, `GET ${path}: HTTP ${res.status}`, {
      retryable: true,
      status: res.status,
    });
  if (!res.ok) return { found: false, status: res.status };
  try {
    return { found: true, body: JSON.parse(text), headers: res.headers };
  } catch {
    return { found: false, status: res.status, notJson: true };
  }
}

/** Parses a JSON body with `schema`; the error names the server URL, the endpoint and each bad field. */
export function parseBody<S extends z.ZodType>(
  schema: S,
  body: unknown,
  base: string,
  path: string,
): z.output<S> {
  try {
    return parseWith(schema, body, `${endpoint(base, path)}`);
  } catch (err) {
    rethrowBadResponse(base, `GET ${path}`, err);
  }
}

/** Rethrows a ParseError as the server's bad response to `request` (`GET /v1/models`), naming the fields; anything else as it is. */
export function rethrowBadResponse(base: string, request: string, err: unknown): never {
  if (err instanceof ParseError)
    throw new ModelServerError(
      base,
      `${request}: bad response: ${err.issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`,
      { cause: err },
    );
  throw err;
}

/** A one-line description of a fetch failure (undici hides the interesting part in `cause`). */
export function describeFetchError(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e.cause?.code) return `${e.cause.code}${e.cause.message ? ` (${e.cause.message})` : ''}`;
  return e.message;
}
