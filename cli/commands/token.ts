import { multiaddr } from '@multiformats/multiaddr';
import { DEFAULT_TOKEN_TTL_MS, issueToken } from '../../node/tokens.ts';
import { parseDuration } from '../../protocol/token.ts';
import { CliError, type Command, parseOptions } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';

const usage = `Usage: vtnode token [--expires 7d] [--announce MULTIADDR]... [--data-dir DIR] [--json]

Prints a fresh join token for this node's fleet. Any member can issue one. The token carries this
node's addresses (or --announce ones) and those of other live members, the fleet's key and an expiry.`;

export const command: Command = {
  name: 'token',
  summary: 'print a fresh join token for this fleet',
  usage,
  async run(argv) {
    const { values } = parseOptions(
      argv,
      {
        'data-dir': { type: 'string' },
        expires: { type: 'string' },
        announce: { type: 'string', multiple: true },
        json: { type: 'boolean' },
      },
      usage,
    );
    const ttl = values.expires === undefined ? DEFAULT_TOKEN_TTL_MS : parseDuration(values.expires);
    if (ttl === null)
      throw new CliError(`--expires ${values.expires}: expected a duration such as 12h or 7d`, 2);
    const dataDir = dataDirFrom(values);
    const fleet = await dataDir.readFleet();
    if (!fleet)
      throw new CliError(`${dataDir.root} is not in a fleet: run \`vtnode init\` or \`vtnode join\` first`);
    const config = await dataDir.readConfig();
    if (values.announce) {
      for (const a of values.announce) {
        try {
          multiaddr(a);
        } catch {
          throw new CliError(`--announce ${a}: not a multiaddr`, 2);
        }
      }
      config.announce = values.announce;
    }
    const { peerId } = await dataDir.identity();
    const issued = await issueToken({ dataDir, fleet, config, peerId, ttlMs: ttl });
    if (values.json) process.stdout.write(`${JSON.stringify({ fleet: fleet.fleet, peerId, ...issued })}\n`);
    else process.stdout.write(`${issued.token}\n`);
    return 0;
  },
};
