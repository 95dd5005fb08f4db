import type { FleetNode } from '../../placement/fleet-view.ts';
import { type Advert, type AdvertModel, Advert as AdvertSchema } from '../../protocol/advert.ts';
import { sha256Hex } from '../../protocol/canonical.ts';
import { parseWith } from '../../protocol/parse.ts';

export const GiB = 2 ** 30;

/** A deterministic sha256 id for a label (workspace or prompt fingerprint). */
export function sid(label: string): string {
  return `sha256:${sha256Hex(label)}`;
}

export const WS = sid('workspace-a');
export const WS_B = sid('workspace-b');
export const MODEL = 'qwen3-coder:30b';

export function model(overrides: Partial<AdvertModel> = {}): AdvertModel {
  return {
    id: MODEL,
    server: 'ollama',
    context: 32768,
    concurrency: 2,
    loaded: true,
    memoryBytes: 20 * GiB,
    ...overrides,
  };
}

/** A valid advert (parsed with the real schema, so tests never feed the placer what the wire would refuse). */
export function advert(peerId: string, overrides: Partial<Advert> = {}): Advert {
  return parseWith(
    AdvertSchema,
    {
      v: 1,
      peerId,
      seq: 1,
      sentAt: 0,
      leaving: false,
      version: '0.1.0',
      host: peerId,
      addrs: [],
      models: [model()],
      memory: { total: 64 * GiB, free: 40 * GiB, reserved: 0 },
      load: { queued: 0, running: 0, capacity: 2 },
      warm: [],
      workspaces: [WS],
      sandbox: { backend: 'bwrap', ok: true },
      roles: [],
      ...overrides,
    },
    `test advert ${peerId}`,
  );
}

/** An advert of a node that serves nothing (no models, no slots, no sandbox), sent now: what a rogue or fuzzing member publishes as its valid base. */
export function bareAdvert(peerId: string, host: string): Advert {
  return advert(peerId, {
    sentAt: Date.now(),
    host,
    models: [],
    memory: { total: 1, free: 1, reserved: 0 },
    load: { queued: 0, running: 0, capacity: 0 },
    workspaces: [],
    sandbox: { backend: 'none', ok: false },
    roles: ['worker'],
  });
}

export function fleetNode(a: Advert, receivedAt = 0): FleetNode {
  return { advert: a, receivedAt, self: false };
}

/** n identical healthy nodes named n0..n(n-1). */
export function fleet(n: number, overrides: Partial<Advert> = {}): FleetNode[] {
  return Array.from({ length: n }, (_, i) => fleetNode(advert(`n${i}`, overrides)));
}

export function task(label: string, workspaceId = WS) {
  return { id: `task-${label}`, promptFingerprint: sid(`prompt-${label}`), workspace: { id: workspaceId } };
}

/** A fully populated advert, every list non-empty. */
export const sampleAdvert: Advert = advert('12D3KooWJYNi68RHpnRSb9ZQvVXMjpXEeFPMuG8gGozqvWT6saKQ', {
  seq: 7,
  sentAt: 1_800_000_000_000,
  host: 'studio-1',
  addrs: ['/ip4/10.0.0.2/tcp/7461'],
  memory: { total: 128 * GiB, free: 90 * GiB, reserved: 19 * GiB },
  load: { queued: 1, running: 2, capacity: 2 },
  warm: [{ prompt: sid('prompt-a'), model: MODEL }],
  roles: ['worker'],
});
