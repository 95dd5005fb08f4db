import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type EmulateKind, type Emulator } from '../../node/model-server/emulator.ts';
import { ModelServerError } from '../../node/models/errors.ts';
import { normaliseServerUrl, probeServer } from '../../node/models/probe.ts';
import { closedPort, fakeServer, json, makeFixtureTasks } from './fixtures.ts';

let fixture: Awaited<ReturnType<typeof makeFixtureTasks>>;
const open: { close: () => Promise<void> }[] = [];

beforeAll(async () => {
  fixture = await makeFixtureTasks(1, 400);
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function emulator(
  emulate: EmulateKind,
  extra: Partial<Parameters<typeof createEmulator>[0]> = {},
): Promise<Emulator> {
  const e = await createEmulator({
    emulate,
    tasks: fixture.tasks,
    timeScale: 0,
    models: ['coder-a', 'coder-b'],
    ...extra,
  });
  open.push(e);
  return e;
}

describe('probeServer', () => {
  it('detects an emulated llama-server from /props: slots -> concurrency, n_ctx -> context', async () => {
    const e = await emulator('llama-server', { concurrency: 3, context: 16384 });
    const p = await probeServer(`${e.url}/v1/`);
    expect(p.url).toBe(e.url);
    expect(p.behaviour).toBe('llama-server');
    expect(p.kind).toBe('vtnode-emulator');
    expect(p.concurrency).toBe(3);
    expect(p.models.map((m) => m.id)).toEqual(['coder-a', 'coder-b']);
    expect(p.models[0]).toEqual({
      id: 'coder-a',
      server: 'vtnode-emulator',
      context: 16384,
      concurrency: 3,
      loaded: true,
      memoryBytes: null,
    });
  });

  it('detects an emulated Ollama from /api/version, and loaded models with memory from /api/ps', async () => {
    const e = await emulator('ollama', { context: 8192 });
    const before = await probeServer(e.url);
    expect(before.behaviour).toBe('ollama');
    expect(before.version).toContain('0.12');
    expect(before.models.every((m) => m.loaded === false && m.memoryBytes === null)).toBe(true);
    const client = new OpenAI({ baseURL: `${e.url}/v1`, apiKey: 'x', maxRetries: 0 });
    await client.chat.completions.create({ model: 'coder-b', messages: [{ role: 'user', content: 'hi' }] });
    const after = await probeServer(e.url);
    const b = after.models.find((m) => m.id === 'coder-b')!;
    expect(b.loaded).toBe(true);
    expect(b.memoryBytes).toBeGreaterThan(1e9);
    expect(b.context).toBe(8192);
    expect(after.models.find((m) => m.id === 'coder-a')!.loaded).toBe(false);
  });

  it('detects an emulated mlx_lm.server from /health served by Python http.server', async () => {
    const e = await emulator('mlx', { concurrency: 2 });
    const p = await probeServer(e.url);
    expect(p.behaviour).toBe('mlx');
    expect(p.concurrency).toBe(2);
    expect(p.models[0]!.context).toBe(32768);
  });

  it('falls back to generic openai for an unidentified server', async () => {
    const s = await fakeServer({
      'GET /v1/models': (_q, r) => json(r, { object: 'list', data: [{ id: 'm' }] }),
    });
    open.push(s);
    const p = await probeServer(s.url);
    expect(p.behaviour).toBe('openai');
    expect(p.kind).toBe('openai');
    expect(p.models).toEqual([
      { id: 'm', server: 'openai', context: null, concurrency: 1, loaded: false, memoryBytes: null },
    ]);
  });

  it('recognises vLLM (/version) and LM Studio (/api/v0/models) shapes', async () => {
    const vllm = await fakeServer({
      'GET /v1/models': (_q, r) =>
        json(r, { data: [{ id: 'Qwen/Qwen3-Coder', max_model_len: 65536, owned_by: 'vllm' }] }),
      'GET /version': (_q, r) => json(r, { version: '0.11.0' }),
    });
    const lms = await fakeServer({
      'GET /v1/models': (_q, r) => json(r, { data: [{ id: 'qwen3-coder' }, { id: 'other' }] }),
      'GET /api/v0/models': (_q, r) =>
        json(r, {
          data: [
            { id: 'qwen3-coder', state: 'loaded', max_context_length: 262144, loaded_context_length: 32768 },
            { id: 'other', state: 'not-loaded', max_context_length: 4096 },
          ],
        }),
    });
    open.push(vllm, lms);
    const v = await probeServer(vllm.url);
    expect(v.behaviour).toBe('vllm');
    expect(v.models[0]).toMatchObject({ context: 65536, loaded: true, concurrency: 16 });
    const l = await probeServer(lms.url);
    expect(l.behaviour).toBe('lm-studio');
    expect(l.models).toMatchObject([
      { id: 'qwen3-coder', context: 32768, loaded: true },
      { id: 'other', context: 4096, loaded: false },
    ]);
  });

  it('names the URL and the field when /v1/models has a bad field', async () => {
    const s = await fakeServer({ 'GET /v1/models': (_q, r) => json(r, { data: [{ id: 5 }] }) });
    open.push(s);
    const err = await probeServer(s.url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelServerError);
    expect((err as Error).message).toContain(s.url);
    expect((err as Error).message).toContain('data.0.id');
  });

  it('names the URL when /v1/models is not JSON', async () => {
    const s = await fakeServer({ 'GET /v1/models': (_q, r) => json(r, '{"data": [') });
    open.push(s);
    await expect(probeServer(s.url)).rejects.toThrow(`${s.url}: GET /v1/models: response is not JSON`);
  });

  it('names /props and the field when a llama-server reports bad slots', async () => {
    const s = await fakeServer({
      'GET /v1/models': (_q, r) => json(r, { data: [{ id: 'm' }] }),
      'GET /props': (_q, r) => json(r, { default_generation_settings: { n_ctx: 4096 }, total_slots: 'two' }),
    });
    open.push(s);
    const err = (await probeServer(s.url).catch((e: unknown) => e)) as Error;
    expect(err.message).toContain(`${s.url}: GET /props: bad response`);
    expect(err.message).toContain('total_slots');
  });

  it('names /api/ps and the field when Ollama reports a bad model size', async () => {
    const s = await fakeServer({
      'GET /v1/models': (_q, r) => json(r, { data: [{ id: 'm' }] }),
      'GET /api/version': (_q, r) => json(r, { version: '0.12.0' }),
      'GET /api/ps': (_q, r) => json(r, { models: [{ name: 'm', size: -1 }] }),
    });
    open.push(s);
    await expect(probeServer(s.url)).rejects.toThrow(/GET \/api\/ps: bad response: models\.0\.size/);
  });

  it('fails with the URL when nothing listens, and on a 5xx, as a retryable error', async () => {
    const port = await closedPort();
    const err = (await probeServer(`http://127.0.0.1:${port}`).catch((e: unknown) => e)) as ModelServerError;
    expect(err.message).toContain(`http://127.0.0.1:${port}`);
    expect(err.retryable).toBe(true);
    const s = await fakeServer({ 'GET /v1/models': (_q, r) => json(r, { error: 'loading' }, 503) });
    open.push(s);
    await expect(probeServer(s.url)).rejects.toThrow(/HTTP 503/);
  });

  it('times out on a server that never answers', async () => {
    const s = await fakeServer({ 'GET /v1/models': () => {} });
    open.push(s);
    await expect(probeServer(s.url, { timeoutMs: 200 })).rejects.toThrow(/no answer within 200 ms/);
  });

  it('rejects URLs that are not http(s)', () => {
    expect(() => normaliseServerUrl('ftp://x')).toThrow(/unsupported scheme/);
    expect(() => normaliseServerUrl('localhost 11434')).toThrow(/not a URL/);
    expect(normaliseServerUrl('http://127.0.0.1:11434/v1/')).toBe('http://127.0.0.1:11434');
  });
});
