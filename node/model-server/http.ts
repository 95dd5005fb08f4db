import type { IncomingMessage, ServerResponse } from 'node:http';

/** Largest request body the emulator reads. */
export const MAX_BODY = 16 * 1024 * 1024;

/** Answers with a JSON body. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Answers with an OpenAI-style error body. */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  type = 'invalid_request_error',
): void {
  sendJson(res, status, { error: { code: status, message, type } });
}

/** The request's body as text; rejects (and destroys the request) past MAX_BODY bytes. */
export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error(`request body over ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
