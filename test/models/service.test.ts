import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import { ModelServerError } from '../../node/models/errors.ts';
import { createModelService, type ModelService } from '../../node/models/service.ts';
import { makeFixtureTasks } from './fixtures.ts';

let fixture: Awaited<ReturnType<typeof makeFixtureTasks>>;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  fixture = await makeFixtureTasks(1, 2000);
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function emulator(
  emulate: 'llama-server' | 'mlx',
  models: string[],
  concurrency: number,
): Promise<Emulator> {
  const e = await createEmulator({
    emulate,
    models,
    concurrency,
    tasks: fixture.tasks,
    timeScale: 0,
    script: 'reference',
  });
  cleanups.push(() => e.close());
  return e;
}

describe('model service', () => {
  it('routes each model to a live server that serves it, shares one warm set, sums load', async () => {
    const a = await emulator('llama-server', ['coder-a'], 2);
    const b = await emulator('mlx', ['coder-b'], 1);
    const service: ModelService = createModelService({
      urls: [a.url, b.url],
      intervalMs: 60_000,
      concurrency: { [`${b.url}/v1`]: 1 },
    });
    cleanups.push(() => service.close());
    await service.registry.ready;
    expect(
      service
        .models()
        .map((m) => m.id)
        .sort(),
    ).toEqual(['coder-a', 'coder-b']);
    expect(service.load()).toEqual({ queued: 0, running: 0, capacity: 3 });
    expect(service.adapterFor('coder-b')?.url).toBe(b.url);
    expect(service.adapterFor('nope')).toBeNull();

    const task = fixture.tasks[0]!;
    for (const model of ['coder-a', 'coder-b']) {
      const out = [];
      for await (const o of service.generate({
        model,
        messages: task.messages,
        k: 2,
        sampling: { maxTokens: 512 },
      }))
        out.push(o);
      expect(out.every((o) => o.ok)).toBe(true);
    }
    expect(a.stats().requests).toBe(2);
    expect(b.stats().requests).toBe(2);
    expect(service.warm.entries().map((w) => w.model)).toEqual(['coder-b', 'coder-a']);

    let err: unknown;
    try {
      service.generate({ model: 'nope', messages: task.messages, k: 1, sampling: { maxTokens: 8 } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelServerError);
    expect((err as Error).message).toMatch(/no live server serves model "nope" \(served: coder-a, coder-b\)/);
  });

  it('applies a concurrency override where the server cannot say', async () => {
    const a = await emulator('mlx', ['coder-a'], 1);
    const service = createModelService({ urls: [a.url], concurrency: { [a.url]: 6 }, intervalMs: 60_000 });
    cleanups.push(() => service.close());
    await service.registry.ready;
    expect(service.models()[0]!.concurrency).toBe(6);
    expect(service.load().capacity).toBe(6);
    expect(() => createModelService({ urls: [a.url], concurrency: { [a.url]: 0 } })).toThrow(
      /positive integer/,
    );
  });

  it('tells its subscribers when a server goes away', async () => {
    const a = await emulator('llama-server', ['coder-a'], 1);
    const service = createModelService({ urls: [a.url], intervalMs: 50, timeoutMs: 500 });
    cleanups.push(() => service.close());
    await service.registry.ready;
    const changed = new Promise<void>((resolve) => {
      const off = service.onChange((states) => {
        if (states[0]?.server === null) {
          off();
          resolve();
        }
      });
    });
    await a.close();
    await changed;
    expect(service.models()).toEqual([]);
    expect(service.adapterFor('coder-a')).toBeNull();
  });
});
