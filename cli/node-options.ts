import { resolve } from 'node:path';
import { multiaddr } from '@multiformats/multiaddr';
import { DataDir, type NodeConfig, resolveDataDir } from '../node/data-dir.ts';
import { CliError } from './command.ts';
import { DATA_DIR, duration, flag, group, int, list, number, orOff, type ValuesOf } from './options.ts';

/** Options shared by the commands that start a node (init, join, start, collect). */
export const NODE_OPTIONS = group('Node options (saved in the data dir, so `vtnode start` reuses them):', {
  'data-dir': DATA_DIR,
  listen: list({
    doc: 'address to listen on, repeatable (default /ip4/0.0.0.0/tcp/7461, or any free port when 7461 is taken)',
    value: 'MULTIADDR',
  }),
  announce: list({
    doc: 'address to put in join tokens, repeatable (default: the listen addresses)',
    value: 'MULTIADDR',
  }),
  mdns: flag({ doc: 'also find fleet members on the LAN by mDNS' }),
  'private-host': flag({ doc: "do not advertise this machine's host name" }),
  'model-server': list({
    doc: 'OpenAI-compatible server, repeatable (default: detect local servers)',
    value: 'URL',
  }),
  workspace: list({ doc: 'built checkout this node scores against, repeatable', value: 'DIR' }),
  'advert-interval': duration({ doc: 'how often to advertise (default 5s)', min: 200 }),
  'max-jobs': int({
    doc: 'jobs (k samples of one task each) generating at once; one whose samples are all generated frees its slot while scored, and one more waits for a slot (default 2)',
    min: 1,
    max: 64,
  }),
  unconfined: flag({ doc: 'score candidates WITHOUT the sandbox: trusted input only' }),
  'pause-on-battery': flag({
    doc: "take no new jobs while the machine runs on battery (a laptop's manners; running jobs finish)",
  }),
  'no-pause-on-battery': flag({ doc: 'turn --pause-on-battery off' }),
  'max-load': orOff(
    number({
      doc: "take no new jobs while the 1-minute load average is above L (resumes below 0.75 L; vtnode's own scoring counts too); off turns it off",
      value: 'L',
      above: 0,
      max: 10_000,
    }),
  ),
  'pause-while-used': orOff(
    duration({
      doc: 'take no new jobs while the keyboard or mouse was used within DUR (e.g. 5m; macOS only); off turns it off',
      min: 1000,
    }),
  ),
  'fetch-workspaces': flag({
    doc: 'fetch, install and score against the workspaces other nodes advertise (tracked files only, never credentials: see docs/workspaces.md)',
  }),
});

/** The node options' values, as a command that includes NODE_OPTIONS parses them. */
export type NodeOptionValues = ValuesOf<typeof NODE_OPTIONS.options>;

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
export function mergeConfig(saved: NodeConfig, values: NodeOptionValues): NodeConfig {
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
  if (values['advert-interval'] !== undefined) config.advertIntervalMs = values['advert-interval'];
  if (values['max-jobs'] !== undefined) config.maxJobs = values['max-jobs'];
  if (values.unconfined !== undefined) config.unconfined = values.unconfined;
  if (values['pause-on-battery'] && values['no-pause-on-battery'])
    throw new CliError('--pause-on-battery and --no-pause-on-battery: pick one', 2);
  if (values['pause-on-battery']) config.pauseOnBattery = true;
  if (values['no-pause-on-battery']) config.pauseOnBattery = false;
  if (values['max-load'] !== undefined) config.maxLoad = values['max-load'];
  if (values['pause-while-used'] !== undefined) config.pauseWhileUsedMs = values['pause-while-used'];
  if (values['fetch-workspaces']) config.fetchWorkspaces = true;
  return config;
}
