// A fleet across real hosts: one network namespace per node on a bridge, default ports, addresses
// from the interfaces. Needs root and iproute2 (CI installs it and runs as root).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetStatus } from '../../node/status.ts';
import { eventually, Sandbox, vtnode } from '../helpers/cli.ts';
import { withBootstrap } from '../helpers/fleet.ts';
import { canCreateNetworks, createTestNetwork, type TestNetwork } from '../helpers/netns.ts';

const box = new Sandbox();
let net: TestNetwork | null = null;
const enabled = await canCreateNetworks();

beforeAll(async () => {
  if (enabled) net = await createTestNetwork(3);
});
afterAll(async () => {
  await box.cleanup();
  await net?.destroy();
});

async function statusOn(i: number, dataDir: string): Promise<FleetStatus> {
  const res = await vtnode(['status', '--json', '--data-dir', dataDir], { prefix: net!.exec(i) });
  if (res.code !== 0) throw new Error(res.stderr);
  return JSON.parse(res.stdout) as FleetStatus;
}

const sees = (i: number, dir: string, n: number) =>
  eventually(
    async () => ((await statusOn(i, dir)).nodes.length === n ? statusOn(i, dir) : null),
    45_000,
    `host ${i} to see ${n} nodes`,
  );

describe.skipIf(!enabled)('a fleet across three hosts (network namespaces)', () => {
  const dirs: string[] = [];
  let token = '';

  it('joins with the default port and interface addresses, and forms a full mesh', async () => {
    for (let i = 0; i < 3; i++) dirs.push(await box.tempDir('vt-ns-'));
    const init = await vtnode(['init', '--fleet', 'lan', '--data-dir', dirs[0]!, '--advert-interval', '1s'], {
      prefix: net!.exec(0),
    });
    expect(init.code).toBe(0);
    token = init.stdout.trim();
    box.spawn(['start', '--data-dir', dirs[0]!], {}, net!.exec(0));
    for (const i of [1, 2]) {
      box.spawn(['join', token, '--data-dir', dirs[i]!, '--advert-interval', '1s'], {}, net!.exec(i));
    }
    for (const i of [0, 1, 2]) await sees(i, dirs[i]!, 3);
    const s = await statusOn(2, dirs[2]!);
    // Every node advertises the address of its own host, on the default port.
    for (const [i, ip] of net!.ips.entries()) {
      const node = s.nodes.find((n) => n.addrs.some((a) => a.startsWith(`/ip4/${ip}/tcp/7461`)));
      expect(node, `a node advertising ${ip}`).toBeDefined();
      if (i === 2) expect(node!.self).toBe(true);
    }
  }, 120_000);

  it('a host cut off is dropped by the others, who still see each other; it returns when reconnected', async () => {
    await net!.setLinkUp(0, false);
    try {
      await sees(1, dirs[1]!, 2);
      await sees(2, dirs[2]!, 2);
    } finally {
      await net!.setLinkUp(0, true);
    }
    for (const i of [0, 1, 2]) await sees(i, dirs[i]!, 3);
  }, 120_000);

  it('--mdns: a laptop whose token names no reachable member finds the fleet on the LAN', async () => {
    const dir = await box.tempDir('vt-ns-');
    const peerId = (await statusOn(0, dirs[0]!)).self;
    // The only bootstrap address is a host that does not exist.
    const lost = withBootstrap(token, [
      `/ip4/${net!.ips[0]!.replace(/\.\d+$/, '.250')}/tcp/7461/p2p/${peerId}`,
    ]);
    // Host 0 runs with --mdns as well (restart it with the option); host 1's node makes room.
    await vtnode(['leave', '--data-dir', dirs[0]!], { prefix: net!.exec(0) });
    box.spawn(['start', '--data-dir', dirs[0]!, '--mdns'], {}, net!.exec(0));
    await vtnode(['leave', '--data-dir', dirs[1]!], { prefix: net!.exec(1) });
    // Another port than the node it replaces, so no remembered address leads to it.
    const args = [
      'join',
      lost,
      '--data-dir',
      dir,
      '--mdns',
      '--listen',
      '/ip4/0.0.0.0/tcp/7462',
      '--advert-interval',
      '1s',
    ];
    box.spawn(args, {}, net!.exec(1));
    const s = await sees(1, dir, 3);
    expect(s.nodes.map((n) => n.peerId)).toContain(peerId);
  }, 120_000);
});
