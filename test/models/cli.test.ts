import { type ChildProcess, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { probeServer } from '../../node/models/probe.ts';
import { extractCodeBlock } from '../../protocol/extract.ts';
import { makeFixtureTasks, referenceSource } from './fixtures.ts';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'vtnode.js');
let fixture: Awaited<ReturnType<typeof makeFixtureTasks>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fixture = await makeFixtureTasks(1, 2000);
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

function start(args: string[]): {
  child: ChildProcess;
  url: Promise<string>;
  exit: Promise<{ code: number | null; stderr: string }>;
} {
  const child = spawn(process.execPath, [BIN, 'model-server', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  const url = new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      stdout += d;
      const line = stdout.split('\n')[0];
      if (stdout.includes('\n') && line) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.on('exit', () => reject(new Error(`exited before printing its URL: ${stderr}`)));
  });
  url.catch(() => {});
  // 'close', not 'exit': the exit code with stderr read to the end (its last line may still be in the pipe at exit).
  const exit = new Promise<{ code: number | null; stderr: string }>((resolve) => {
    child.on('close', (code) => resolve({ code, stderr }));
  });
  return { child, url, exit };
}

describe('vtnode model-server', () => {
  it('serves the emulated kind as a separate process, answers from the tasks, and exits cleanly on SIGTERM', async () => {
    const { child, url, exit } = start([
      '--port',
      '0',
      '--emulate',
      'ollama',
      '--tasks',
      fixture.tasksFile,
      '--script',
      'reference',
      '--time-scale',
      '0',
      '--model',
      'qwen3-coder:30b',
      '--concurrency',
      '2',
    ]);
    const base = await url;
    const probed = await probeServer(base);
    expect(probed.behaviour).toBe('ollama');
    expect(probed.concurrency).toBe(2);
    expect(probed.models.map((m) => m.id)).toEqual(['qwen3-coder:30b']);
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'x', maxRetries: 0 });
    const res = await client.chat.completions.create({
      model: 'qwen3-coder:30b',
      messages: fixture.tasks[0]!.messages,
      seed: 1,
    });
    const extracted = extractCodeBlock(res.choices[0]!.message.content ?? '');
    expect(extracted).toEqual({ ok: true, code: referenceSource(0), lang: 'ts' });
    expect(res.usage?.prompt_tokens_details).toBeUndefined();
    child.kill('SIGTERM');
    expect((await exit).code).toBe(0);
  });

  it('injects faults given on the command line and switches them at runtime', async () => {
    const { url } = start([
      '--port',
      '0',
      '--emulate',
      'llama-server',
      '--tasks',
      fixture.tasksFile,
      '--time-scale',
      '0',
      '--fault',
      'error=1',
    ]);
    const base = await url;
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'x', maxRetries: 0 });
    const body = { model: 'vtnode-emulated-coder', messages: fixture.tasks[0]!.messages };
    await expect(client.chat.completions.create(body)).rejects.toMatchObject({ status: 500 });
    const set = await fetch(`${base}/vtnode/emulator/faults`, {
      method: 'POST',
      body: JSON.stringify({ errorRate: 0 }),
    });
    expect(set.status).toBe(200);
    await expect(client.chat.completions.create(body)).resolves.toMatchObject({ object: 'chat.completion' });
    const bad = await fetch(`${base}/vtnode/emulator/faults`, {
      method: 'POST',
      body: JSON.stringify({ errorRate: 2 }),
    });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('errorRate');
    const info = (await (await fetch(`${base}/vtnode/emulator`)).json()) as {
      stats: { faults: { error: number } };
    };
    expect(info.stats.faults.error).toBe(1);
  });

  it('refuses bad arguments with a clear message', async () => {
    const cases: [string[], RegExp, number][] = [
      [
        ['--port', '0', '--emulate', 'sglang', '--tasks', fixture.tasksFile],
        /--emulate must be one of llama-server, vllm, ollama, mlx/,
        2,
      ],
      [
        ['--port', '0', '--emulate', 'vllm', '--tasks', fixture.tasksFile, '--share-prefill', 'maybe'],
        /--share-prefill must be one of on, off, got "maybe"/,
        2,
      ],
      [['--emulate', 'ollama', '--tasks', fixture.tasksFile], /--port P is required/, 2],
      [['--port', '0', '--emulate', 'ollama'], /--tasks FILE is required/, 2],
      [
        ['--port', '0', '--emulate', 'ollama', '--tasks', fixture.tasksFile, '--fault', 'boom=1'],
        /--fault: bad entry "boom=1"/,
        2,
      ],
      [
        ['--port', '0', '--emulate', 'ollama', '--tasks', fixture.tasksFile, '--fault', 'hang=3'],
        /hangRate/,
        2,
      ],
      [
        ['--port', '0', '--emulate', 'ollama', '--tasks', fixture.tasksFile, '--script', 'poetry'],
        /--script must be one of/,
        2,
      ],
      [
        ['--port', '0', '--emulate', 'ollama', '--tasks', join(fixture.dir, 'missing.jsonl')],
        /--tasks: the tasks file \S+missing\.jsonl does not exist/,
        1,
      ],
    ];
    for (const [args, message, code] of cases) {
      const { exit } = start(args);
      const r = await exit;
      expect(r.stderr).toMatch(message);
      expect(r.code).toBe(code);
    }
  });

  it('names the file, line and field of a bad tasks file', async () => {
    const bad = join(fixture.dir, 'bad.jsonl');
    await writeFile(bad, `${JSON.stringify(fixture.tasks[0])}\n{"id": "x", "kind": "file"}\n`);
    const { exit } = start(['--port', '0', '--emulate', 'mlx', '--tasks', bad]);
    const r = await exit;
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${bad}:2`);
    expect(r.stderr).toContain('workspace');
  });
});
