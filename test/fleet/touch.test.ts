// A node's advert on change (Fleet.touch): published on a later turn of the event loop, once per burst
// of changes, and only when the description changed. A change is often noticed on a job's critical
// path (a job slot freed, a warm answer just before its fan-out): building, signing and publishing
// the advert then must not delay the model request the same turn starts (docs/benchmarks.md).
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { afterEach, describe, expect, it } from 'vitest';
import { type AdvertBody, decodeAdvert } from '../../node/fleet/adverts.ts';
import { createFleet, type Fleet } from '../../node/fleet/fleet.ts';
import type { Host } from '../../node/fleet/host.ts';
import { until } from '../helpers/fake-worker.ts';

const fleets: Fleet[] = [];
afterEach(async () => {
  for (const f of fleets.splice(0)) await f.stop();
});

/** A libp2p host with no peers: what the fleet calls, its gossip publishes recorded. */
async function loneHost() {
  const peerId = peerIdFromPrivateKey(await generateKeyPair('Ed25519'));
  const published: Uint8Array[] = [];
  const host = {
    peerId,
    addEventListener: () => {},
    removeEventListener: () => {},
    getConnections: () => [],
    dial: async () => {
      throw new Error('no peers here');
    },
    peerStore: { merge: async () => {} },
    services: {
      pubsub: {
        topicValidators: new Map(),
        subscribe: () => {},
        addEventListener: () => {},
        removeEventListener: () => {},
        publish: async (_topic: string, data: Uint8Array) => {
          published.push(data);
          return { recipients: [] };
        },
      },
    },
  } as unknown as Host;
  return { host, published, peerId: peerId.toString() };
}

/** A fleet over a lone host whose description is `body()`; `describes()` counts the calls. */
async function lone(body: () => AdvertBody) {
  const { host, published, peerId } = await loneHost();
  let describes = 0;
  const fleet = createFleet({
    host,
    fleetId: 'f',
    intervalMs: 60_000,
    seqBase: 1,
    bootstrap: [],
    describe: () => {
      describes++;
      return body();
    },
  });
  fleets.push(fleet);
  await until(() => published.length === 1, 'the first advert');
  return { fleet, published, peerId, describes: () => describes };
}

function bodyWith(running: number): AdvertBody {
  return {
    version: '0.1.0',
    host: null,
    addrs: [],
    models: [],
    memory: { total: 1, free: 1, reserved: 0 },
    load: { queued: 0, running, capacity: 2 },
    warm: [],
    workspaces: [],
    sandbox: { backend: 'none', ok: false, detail: 'test' },
    roles: ['submitter'],
    cert: null,
  } as unknown as AdvertBody;
}

describe('the advert on change', () => {
  it('is published on a later turn, once for the changes made in one turn, with the last of them', async () => {
    let running = 0;
    const { fleet, published, peerId } = await lone(() => bodyWith(running));
    for (const n of [1, 2, 3]) {
      running = n;
      fleet.touch();
    }
    // Nothing is described, signed or sent in the caller's turn.
    expect(published).toHaveLength(1);
    await until(() => published.length === 2, 'the advert of the change');
    expect(decodeAdvert(published[1]!, peerId).load).toMatchObject({ running: 3 });
    // The burst gave one advert: the next change gives the next.
    running = 0;
    fleet.touch();
    await until(() => published.length === 3, 'the advert of the next change');
    expect(decodeAdvert(published[2]!, peerId).load).toMatchObject({ running: 0 });
  });

  it('is not published when nothing changed since the last advert', async () => {
    const { fleet, published, describes } = await lone(() => bodyWith(1));
    const before = describes();
    fleet.touch();
    fleet.touch();
    // The check ran (the description was read once, for both touches) and found nothing new.
    await until(() => describes() === before + 1, 'the change check');
    expect(published).toHaveLength(1);
  });

  it('is not published once the fleet stops: its leaving advert is the last', async () => {
    let running = 0;
    const { fleet, published, peerId, describes } = await lone(() => bodyWith(running));
    running = 1;
    fleet.touch();
    await fleet.stop();
    const after = published.length;
    expect(decodeAdvert(published[after - 1]!, peerId).leaving).toBe(true);
    const described = describes();
    running = 2;
    fleet.touch();
    // Neither the touch made before stop (its check was still due) nor this one sends anything: a
    // timer set now fires after that check (timers fire in the order they fall due).
    await new Promise((r) => setTimeout(r, 5));
    expect(describes()).toBe(described);
    expect(published).toHaveLength(after);
  });
});
