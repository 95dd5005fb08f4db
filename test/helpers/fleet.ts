import type { FleetStatus } from '../../node/status.ts';
import { TOKEN_VERSION, type TokenBody } from '../../protocol/token.ts';
import { eventually, freePort, type Proc, type Sandbox, vtnode } from './cli.ts';
import { notYet } from './poll.ts';

/** Fast adverts so tests see joins and departures within seconds. */
export const INTERVAL = '1s';

export interface TestNode {
  dataDir: string;
  proc: Proc;
}

/** `vtnode init` a fleet in a fresh data dir on a free loopback port; returns the data dir and token. */
export async function initFleet(
  box: Sandbox,
  fleet: string,
  extra: string[] = [],
): Promise<{ dataDir: string; token: string }> {
  const dataDir = await box.tempDir(`vt-${fleet}-`);
  const port = await freePort();
  const res = await vtnode([
    'init',
    '--fleet',
    fleet,
    '--data-dir',
    dataDir,
    '--listen',
    `/ip4/127.0.0.1/tcp/${port}`,
    '--advert-interval',
    INTERVAL,
    ...extra,
  ]);
  if (res.code !== 0) throw new Error(`init failed: ${res.stderr}`);
  return { dataDir, token: res.stdout.trim() };
}

export function startNode(box: Sandbox, dataDir: string, extra: string[] = []): TestNode {
  const proc = box.spawn(['start', '--data-dir', dataDir, ...extra]);
  return { dataDir, proc };
}

export async function joinNode(
  box: Sandbox,
  token: string,
  extra: string[] = [],
  env: NodeJS.ProcessEnv = {},
  dataDir?: string,
): Promise<TestNode> {
  dataDir ??= await box.tempDir('vt-node-');
  const proc = box.spawn(
    [
      'join',
      token,
      '--data-dir',
      dataDir,
      '--listen',
      '/ip4/127.0.0.1/tcp/0',
      '--advert-interval',
      INTERVAL,
      ...extra,
    ],
    env,
  );
  return { dataDir, proc };
}

export async function status(dataDir: string): Promise<FleetStatus> {
  const res = await vtnode(['status', '--json', '--data-dir', dataDir]);
  if (res.code !== 0) throw new Error(`status failed: ${res.stderr}`);
  return JSON.parse(res.stdout) as FleetStatus;
}

/** Waits until the node of `dataDir` sees exactly the peers `expected` (bounded). */
export function waitForPeers(dataDir: string, expected: string[], timeoutMs = 20_000): Promise<FleetStatus> {
  const want = [...expected].sort().join(',');
  return eventually(
    async () => {
      const s = await status(dataDir);
      const seen = s.nodes
        .map((n) => n.peerId)
        .sort()
        .join(',');
      return seen === want ? s : notYet(`sees ${seen.split(',').map((p) => p.slice(-8))}`);
    },
    timeoutMs,
    `${dataDir} to see ${expected.length} nodes`,
  );
}

export async function peerIdOf(dataDir: string, timeoutMs = 60_000): Promise<string> {
  return eventually(async () => (await status(dataDir)).self, timeoutMs, `${dataDir} to answer status`);
}

/** A token's JSON body, read without any check (tests edit tokens the way a person could). */
export function tokenJson(token: string): TokenBody {
  return JSON.parse(
    Buffer.from(token.trim().replace(/^vt\d+\./, ''), 'base64url').toString('utf8'),
  ) as TokenBody;
}

/** Encodes a (possibly edited) token body as a token, without any check. */
export function rawToken(body: unknown): string {
  return `vt${TOKEN_VERSION}.${Buffer.from(JSON.stringify(body)).toString('base64url')}`;
}

/** The same token with other bootstrap addresses (they are not signed: only the invitation is). */
export function withBootstrap(token: string, bootstrap: string[]): string {
  return rawToken({ ...tokenJson(token), bootstrap });
}
