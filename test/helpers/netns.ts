import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Several hosts on one machine: network namespaces on a bridge, each with its own address. */
export interface TestNetwork {
  /** Namespace names, one per host. */
  hosts: string[];
  /** IPv4 address of each host. */
  ips: string[];
  /** argv prefix that runs a command inside host i. */
  exec(i: number): string[];
  /** Cuts host i off the bridge (or reconnects it). */
  setLinkUp(i: number, up: boolean): Promise<void>;
  destroy(): Promise<void>;
}

async function ip(...args: string[]): Promise<void> {
  await run('ip', args);
}

/** True when this process may create namespaces (root with iproute2). */
export async function canCreateNetworks(): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  try {
    await run('ip', ['netns', 'list']);
    return true;
  } catch {
    return false;
  }
}

/** Creates `count` hosts 10.77.<net>.1.. on a private bridge; unique names per test process. */
export async function createTestNetwork(count: number): Promise<TestNetwork> {
  const tag = `${process.pid % 10000}`;
  const net = (process.pid % 200) + 20;
  const bridge = `vtbr${tag}`;
  const hosts = Array.from({ length: count }, (_, i) => `vt${tag}h${i}`);
  const ips = hosts.map((_, i) => `10.77.${net}.${i + 1}`);
  const created: string[] = [];
  const destroy = async () => {
    for (const h of created) await ip('netns', 'del', h).catch(() => {});
    await ip('link', 'del', bridge).catch(() => {});
  };
  try {
    await ip('link', 'add', bridge, 'type', 'bridge');
    await ip('link', 'set', bridge, 'up');
    for (const [i, h] of hosts.entries()) {
      await ip('netns', 'add', h);
      created.push(h);
      const outside = `vt${tag}v${i}`;
      await ip('link', 'add', outside, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', h);
      await ip('link', 'set', outside, 'master', bridge);
      await ip('link', 'set', outside, 'up');
      await ip('-n', h, 'addr', 'add', `${ips[i]}/24`, 'dev', 'eth0');
      await ip('-n', h, 'link', 'set', 'eth0', 'up');
      await ip('-n', h, 'link', 'set', 'lo', 'up');
      // Multicast (mDNS) leaves through the bridge, as on a LAN.
      await ip('-n', h, 'route', 'add', '224.0.0.0/4', 'dev', 'eth0');
    }
  } catch (err) {
    await destroy();
    throw err;
  }
  return {
    hosts,
    ips,
    exec: (i) => ['ip', 'netns', 'exec', hosts[i]!],
    setLinkUp: (i, up) => ip('link', 'set', `vt${tag}v${i}`, up ? 'up' : 'down'),
    destroy,
  };
}
