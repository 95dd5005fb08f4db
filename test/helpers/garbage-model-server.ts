// A model server that answers every request with garbage (drills: "a model server that returns
// garbage"): HTTP 200 with, in turn, an HTML error page, truncated JSON, JSON of the wrong shape, a
// chat completion without choices, and random bytes. Prints one line per request on stdout.
//   node test/helpers/garbage-model-server.ts PORT [HOST]

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

/** The answers, used in turn: none is an OpenAI-compatible answer. */
export const GARBAGE: readonly { type: string; body: () => string | Buffer }[] = [
  { type: 'text/html', body: () => '<html><body><h1>502 Bad Gateway</h1></body></html>' },
  { type: 'application/json', body: () => '{"object":"chat.completion","choices":[{"message":{"con' },
  { type: 'application/json', body: () => '{"data": 42, "choices": "none"}' },
  { type: 'application/json', body: () => '{"object":"chat.completion","choices":[]}' },
  { type: 'application/octet-stream', body: () => randomBytes(512) },
];

if (import.meta.main) {
  const port = Number(process.argv[2]);
  const host = process.argv[3] ?? '127.0.0.1';
  let n = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const answer = GARBAGE[n++ % GARBAGE.length]!;
      process.stdout.write(`garbage ${n}: ${req.method} ${req.url}\n`);
      res.writeHead(200, { 'content-type': answer.type });
      res.end(answer.body());
    });
  });
  server.listen(port, host, () => process.stdout.write(`garbage server on http://${host}:${port}\n`));
  process.once('SIGTERM', () => server.close(() => process.exit(0)));
}
