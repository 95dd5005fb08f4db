import { resolve } from 'node:path';
import { multiaddr } from '@multiformats/multiaddr';
import { DataDir, type NodeConfig, resolveDataDir } from '../node/data-dir.ts';
import { parseDuration } from '../protocol/token.ts';
import { CliError } from './command.ts';

/** Options shared by the commands that start a node (init, join, start). */
export const nodeOptions = {
  'data-dir': { type: 'string' },
  listen: { type: 'string', multiple: true },
  announce: { type: 'string', multiple: true },
  mdns: { type: 'boolean' },
  'private-host': { type: 'boolean' },
  'model-server': { type: 'string', multiple: true },
  workspace: { type: 'string', multiple: true },
  'advert-interval': { type: 'string' },
  'max-jobs': { type: 'string' },
  unconfined: { type: 'boolean' },
  'pause-on-battery': { type: 'boolean' },
  'no-pause-on-battery': { type: 'boolean' },
  'max-load': { type: 'string' },
  'pause-while-used': { type: 'string' },
  'fetch-workspaces': { type: 'boolean' },
} as const;

export const nodeOptionsUsage = `Node options (saved in the data dir, so \`vtnode start\` reuses them):
  --data-dir DIR           node state (default $VTNODE_HOME or ~/.vtnode)
  --listen MULTIADDR       address to listen on, repeatable (default /ip4/0.0.0.0/tcp/7461,
                           or any free port when 7461 is taken)
  --announce MULTIADDR     address to put in join tokens, repeatable (default: the listen addresses)
  --mdns                   also find fleet members on the LAN by mDNS
  --private-host           do not advertise this machine's host name
  --model-server URL       OpenAI-compatible server, repeatable (default: detect local servers)
  --workspace DIR          built checkout this node scores against, repeatable
  --advert-interval DUR    how often to advertise (default 5s)
  --max-jobs N             jobs (k samples of one task each) run at once (default 2)
  --unconfined             score candidates WITHOUT the sandbox: trusted input only
  --pause-on-battery       take no new jobs while the machine runs on battery (a laptop's manners;
                           running jobs finish); --no-pause-on-battery turns it off
  --max-load L             take no new jobs while the 1-minute load average is above L (resumes
                           below 0.75 L; vtnode's own scoring counts too); off turns it off
  --pause-while-used DUR   take no new jobs while the keyboard or mouse was used within DUR
                           (e.g. 5m; macOS only); off turns it off
  --fetch-workspaces       fetch, install and score against the workspaces other nodes advertise
                           (tracked files only, never credentials: see docs/workspaces.md)`;

export function dataDirFrom(values: { 'data-dir'?: string }): DataDir {
  return new DataDir(resolveDataDir(values['data-dir']));
}

function checkMultiaddrs(list: string[] | undefined, flag: string): string[] | undefined {
  if (!list) return undefined;
  for (const a of list) {
    try {
      multiaddr(a);
    } catch {
      throw new CliError(`--${flag} ${a}: not a multiaddr (e.g. /ip4/192.168.1.20/tcp/7461)`, 2);
    }
  }
  return list;
}

/** The saved config, overridden by whatever node options were given on the command line. */
export function mergeConfig(
  saved: NodeConfig,
  values: {
    listen?: string[];
    announce?: string[];
    mdns?: boolean;
    'private-host'?: boolean;
    'model-server'?: string[];
    workspace?: string[];
    'advert-interval'?: string;
    'max-jobs'?: string;
    unconfined?: boolean;
    'pause-on-battery'?: boolean;
    'no-pause-on-battery'?: boolean;
    'max-load'?: string;
    'pause-while-used'?: string;
    'fetch-workspaces'?: boolean;
  },
): NodeConfig {
  const config = { ...saved };
  const listen = checkMultiaddrs(values.listen, 'listen');
  if (listen) config.listen = listen;
  const announce = checkMultiaddrs(values.announce, 'announce');
  if (announce) config.announce = announce;
  if (values.mdns !== undefined) config.mdns = values.mdns;
  if (values['private-host'] !== undefined) config.privateHost = values['private-host'];
  if (values['model-server']) {
    for (const url of values['model-server']) {
      if (!URL.canParse(url))
        throw new CliError(`--model-server ${url}: not a URL (e.g. http://127.0.0.1:11434)`, 2);
    }
    config.modelServers = values['model-server'];
  }
  if (values.workspace) config.workspaces = values.workspace.map((w) => resolve(w));
  if (values['advert-interval'] !== undefined) {
    const ms = parseDuration(values['advert-interval']);
    if (ms === null || ms < 200)
      throw new CliError(`--advert-interval ${values['advert-interval']}: expected e.g. 5s`, 2);
    config.advertIntervalMs = ms;
  }
  if (values['max-jobs'] !== undefined) {
    const n = Number(values['max-jobs']);
    if (!Number.isInteger(n) || n < 1 || n > 64)
      throw new CliError(`--max-jobs ${values['max-jobs']}: expected 1-64`, 2);
    config.maxJobs = n;
  }
  if (values.unconfined !== undefined) config.unconfined = values.unconfined;
  if (values['pause-on-battery'] && values['no-pause-on-battery'])
    throw new CliError('--pause-on-battery and --no-pause-on-battery: pick one', 2);
  if (values['pause-on-battery']) config.pauseOnBattery = true;
  if (values['no-pause-on-battery']) config.pauseOnBattery = false;
  if (values['max-load'] !== undefined) config.maxLoad = maxLoad(values['max-load']);
  if (values['pause-while-used'] !== undefined)
    config.pauseWhileUsedMs = pauseWhileUsed(values['pause-while-used']);
  if (values['fetch-workspaces']) config.fetchWorkspaces = true;
  return config;
}

function maxLoad(text: string): number | null {
  if (text === 'off') return null;
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n <= 0 || n > 10_000)
    throw new CliError(`--max-load ${text}: expected a load average such as 6, or off`, 2);
  return n;
}

function pauseWhileUsed(text: string): number | null {
  if (text === 'off') return null;
  const ms = parseDuration(text);
  if (ms === null || ms < 1000) throw new CliError(`--pause-while-used ${text}: expected e.g. 5m, or off`, 2);
  return ms;
}
