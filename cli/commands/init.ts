import { newPsk } from '../../node/data-dir.ts';
import { DEFAULT_PORT } from '../../node/net.ts';
import { DEFAULT_TOKEN_TTL_MS, issueToken } from '../../node/tokens.ts';
import { FleetId, parseDuration } from '../../protocol/token.ts';
import { CliError, type Command, parseOptions } from '../command.ts';
import { dataDirFrom, mergeConfig, nodeOptions, nodeOptionsUsage } from '../node-options.ts';

const usage = `Usage: vtnode init --fleet NAME [--expires 7d] [node options]

Creates a fleet: a data dir with this node's identity and the fleet's pre-shared key, and prints a
join token for other machines (\`vtnode join <token>\`). Then run \`vtnode start\` to bring this node up.

  --fleet NAME      fleet name (a-z, 0-9, -)
  --expires DUR     token lifetime, e.g. 12h, 7d (default 7d)
  --json            print { fleet, peerId, dataDir, token, bootstrap, expires } as JSON
${nodeOptionsUsage}`;

export const command: Command = {
  name: 'init',
  summary: 'create a fleet and print a join token',
  usage,
  async run(argv) {
    const { values } = parseOptions(
      argv,
      { ...nodeOptions, fleet: { type: 'string' }, expires: { type: 'string' }, json: { type: 'boolean' } },
      usage,
    );
    if (!values.fleet) throw new CliError(`--fleet NAME is required\n\n${usage}`, 2);
    const fleetId = FleetId.safeParse(values.fleet);
    if (!fleetId.success)
      throw new CliError(`--fleet ${values.fleet}: ${fleetId.error.issues[0]?.message}`, 2);
    const ttl = values.expires === undefined ? DEFAULT_TOKEN_TTL_MS : parseDuration(values.expires);
    if (ttl === null)
      throw new CliError(`--expires ${values.expires}: expected a duration such as 12h or 7d`, 2);

    const dataDir = dataDirFrom(values);
    const existing = await dataDir.readFleet();
    if (existing) {
      throw new CliError(
        `${dataDir.root} already belongs to fleet "${existing.fleet}"; use \`vtnode token\` for a new token, or another --data-dir`,
      );
    }
    await dataDir.ensure();
    const { peerId } = await dataDir.identity();
    const config = mergeConfig(await dataDir.readConfig(), values);
    // The node that creates the fleet is the first bootstrap peer: its port must not move.
    if (config.listen.length === 0) config.listen = [`/ip4/0.0.0.0/tcp/${DEFAULT_PORT}`];
    const fleet = { fleet: fleetId.data, psk: newPsk(), bootstrap: [], since: Date.now() };
    await dataDir.writeConfig(config);
    await dataDir.writeFleet(fleet);
    const issued = await issueToken({ dataDir, fleet, config, peerId, ttlMs: ttl });
    if (values.json) {
      process.stdout.write(
        `${JSON.stringify({ fleet: fleet.fleet, peerId, dataDir: dataDir.root, ...issued })}\n`,
      );
    } else {
      process.stderr.write(
        `Created fleet "${fleet.fleet}" in ${dataDir.root} (this node: ${peerId}).\n` +
          `Join token (valid until ${new Date(issued.expires).toISOString()}), for \`vtnode join <token>\` on other machines:\n`,
      );
      process.stdout.write(`${issued.token}\n`);
      process.stderr.write('Now start this node: vtnode start\n');
    }
    return 0;
  },
};
