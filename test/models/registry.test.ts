import { afterEach, describe, expect, it } from 'vitest';
import { createEmulator } from '../../node/model-server/emulator.ts';
import {
  createModelServerRegistry,
  detectLocalServers,
  type ServerState,
} from '../../node/models/registry.ts';
import { closedPort } from './fixtures.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function nextChange(target: EventTarget, timeoutMs = 5000): Promise<ServerState[]> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('no change event')), timeoutMs);
    target.addEventListener(
      'change',
      (e) => {
        clearTimeout(t);
        resolve((e as CustomEvent<ServerState[]>).detail);
      },
      { once: true },
    );
  });
}

describe('model server registry', () => {
  it('auto-detection with nothing listening returns empty without throwing', async () => {
    const ports = [await closedPort(), await closedPort()];
    await expect(detectLocalServers({ ports, timeoutMs: 500 })).resolves.toEqual([]);
    const registry = createModelServerRegistry({ autodetectPorts: ports, intervalMs: 50, timeoutMs: 500 });
    cleanups.push(() => registry.stop());
    await registry.refresh();
    expect(registry.servers()).toEqual([]);
    expect(registry.models()).toEqual([]);
    expect(registry.states()).toEqual([]);
  });

  it('auto-detection on the real well-known ports never throws', async () => {
    const found = await detectLocalServers({ timeoutMs: 500 });
    expect(Array.isArray(found)).toBe(true);
  });

  it('auto-detects an emulator on a candidate port', async () => {
    const e = await createEmulator({ emulate: 'llama-server', timeScale: 0 });
    cleanups.push(() => e.close());
    const found = await detectLocalServers({ ports: [await closedPort(), e.port], timeoutMs: 1000 });
    expect(found.map((s) => s.url)).toEqual([e.url]);
  });

  it('keeps a configured server that is down, re-probes it, and emits change when it comes up and goes down', async () => {
    const e = await createEmulator({ emulate: 'mlx', timeScale: 0 });
    const port = e.port;
    await e.close();
    const registry = createModelServerRegistry({
      urls: [`http://127.0.0.1:${port}/v1`],
      intervalMs: 50,
      timeoutMs: 500,
    });
    cleanups.push(() => registry.stop());
    await registry.refresh();
    const [down] = registry.states();
    expect(down).toMatchObject({ url: `http://127.0.0.1:${port}`, configured: true, server: null });
    expect(down!.error).toContain(`http://127.0.0.1:${port}`);
    expect(registry.models()).toEqual([]);

    const up = nextChange(registry);
    const again = await createEmulator({ emulate: 'mlx', timeScale: 0, port, models: ['m1'] });
    let closed = false;
    cleanups.push(() => (closed ? undefined : again.close()));
    const states = await up;
    expect(states[0]!.server?.behaviour).toBe('mlx');
    expect(registry.models().map((m) => m.id)).toEqual(['m1']);

    const gone = nextChange(registry);
    await again.close();
    closed = true;
    const after = await gone;
    expect(after[0]!.server).toBeNull();
    expect(registry.servers()).toEqual([]);
  });

  it('stops probing when its signal aborts', async () => {
    const ac = new AbortController();
    const registry = createModelServerRegistry({
      urls: ['http://127.0.0.1:9'],
      intervalMs: 20,
      signal: ac.signal,
    });
    ac.abort();
    await registry.refresh();
    expect(registry.states().length).toBe(1);
  });
});
