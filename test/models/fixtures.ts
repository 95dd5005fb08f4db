import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fingerprint, sha256Hex } from '../../protocol/canonical.ts';
import type { ChatMessage, Task } from '../../protocol/task.ts';

/** The reference of the fixture tasks' target: has equalities, comparisons, numbers, booleans, returns. */
export function referenceSource(i: number): string {
  return [
    `export function clamp${i}(x: number, lo: number, hi: number): number {`,
    '  if (x < lo) return lo;',
    '  if (x > hi) return hi;',
    '  return x;',
    '}',
    '',
    `export const LIMIT${i} = ${100 + i};`,
    `export function isZero${i}(x: number): boolean {`,
    '  return x === 0 ? true : false;',
    '}',
    '',
  ].join('\n');
}

/** A tiny workspace in a temp dir with `count` tasks whose prompts are ~`promptChars` characters. */
export async function makeFixtureTasks(
  count = 2,
  promptChars = 8000,
): Promise<{ dir: string; tasks: Task[]; tasksFile: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'vtnode-models-'));
  await mkdir(join(dir, 'src'), { recursive: true });
  const tasks: Task[] = [];
  for (let i = 0; i < count; i++) {
    const target = `src/clamp${i}.ts`;
    const reference = referenceSource(i);
    await writeFile(join(dir, target), reference);
    const context = `// context of task ${i}\n`.padEnd(promptChars, `const filler${i} = 'x';\n`);
    const messages: ChatMessage[] = [
      {
        role: 'system',
        content: 'You write TypeScript. Answer with the complete file in one fenced code block.',
      },
      { role: 'user', content: `${context}\nWrite ${target}.` },
    ];
    tasks.push({
      id: `task-${i}`,
      kind: 'file',
      workspace: { id: fingerprint({ fixture: dir }), commit: null, clean: false, root: dir },
      module: 'clamp',
      group: 'clamp',
      split: 'train',
      target,
      messages,
      promptFingerprint: fingerprint(messages),
      judge: {
        runner: 'node:test',
        testFiles: ['test/clamp.test.ts'],
        timeoutMs: 60_000,
        typecheck: null,
        flaky: false,
      },
      referenceHash: `sha256:${sha256Hex(reference)}`,
      minedAt: 'uncommitted',
      mustDeclare: [],
      minerVersion: 'test',
    });
  }
  const tasksFile = join(dir, 'tasks.jsonl');
  await writeFile(tasksFile, `${tasks.map((t) => JSON.stringify(t)).join('\n')}\n`);
  return { dir, tasks, tasksFile, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** A hand-written HTTP server for bad-server cases: `routes` maps "METHOD /path" to a handler. */
export async function fakeServer(
  routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void>,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    const route = routes[`${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`];
    req.resume();
    if (route) req.on('end', () => route(req, res));
    else {
      res.writeHead(404);
      res.end('not found');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export function json(res: ServerResponse, body: unknown, status = 200): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** A port that nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
