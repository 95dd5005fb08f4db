import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { createHost, type Host } from '../../node/fleet/host.ts';
import { digestTopic } from '../../protocol/topics.ts';

export const FLEET = 'collect-test';

/** A real libp2p host on loopback with the fleet's digest topic. */
export async function testHost(psk: string): Promise<Host> {
  return createHost({
    privateKey: await generateKeyPair('Ed25519'),
    psk,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    mdns: false,
    topics: [digestTopic(FLEET)],
  });
}

/** Dials b from a (bounded). */
export async function connect(a: Host, b: Host): Promise<void> {
  await a.dial(b.getMultiaddrs()[0]!, { signal: AbortSignal.timeout(5000) });
}

/** Polls `check` until it returns a non-null value (bounded). */
export async function until<T>(
  check: () => T | null | undefined | false,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A temp dir removed by the returned cleanup. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
