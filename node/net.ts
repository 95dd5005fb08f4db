import { type AddressInfo, createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { multiaddr } from '@multiformats/multiaddr';

/** The default TCP port of a vtnode. */
export const DEFAULT_PORT = 7461;

/** True when a TCP port can be bound on the host. */
export function portFree(port: number, host = '0.0.0.0'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/** A TCP port free on `host` right now (the OS picks it; another process may take it before use). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** IPv4 addresses of this machine, external ones first, loopback last. */
export function localIPv4(): string[] {
  const external: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) {
      if (info.family === 'IPv4' && !info.internal) external.push(info.address);
    }
  }
  return [...external, '127.0.0.1'];
}

/**
 * The dialable forms of listen addresses: a wildcard host (0.0.0.0) becomes each local IPv4 address.
 * Addresses with port 0 are dropped (their real port is known only once the node runs).
 */
export function dialableAddrs(listen: string[]): string[] {
  const out: string[] = [];
  for (const addr of listen) {
    const ma = multiaddr(addr);
    const opts = ma.toOptions();
    if (opts.port === 0) continue;
    if (opts.host === '0.0.0.0') {
      for (const ip of localIPv4()) out.push(`/ip4/${ip}/tcp/${opts.port}`);
    } else {
      out.push(addr);
    }
  }
  return [...new Set(out)];
}

/** Removes a trailing /p2p/<id>. */
export function withoutPeerId(addr: string): string {
  return addr.replace(/\/p2p\/[^/]+$/, '');
}
