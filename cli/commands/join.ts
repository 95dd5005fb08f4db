import { decodeToken, TokenError } from '../../protocol/token.ts';
import { CliError, type Command, parseOptions } from '../command.ts';
import { dataDirFrom, mergeConfig, nodeOptions, nodeOptionsUsage } from '../node-options.ts';
import { runDaemonForeground } from '../run-daemon.ts';

const usage = `Usage: vtnode join TOKEN [node options]

Joins the fleet a token names and runs this node in the foreground (Ctrl-C leaves). The token is
saved in the data dir: later, \`vtnode start\` brings the node back with the same identity.
${nodeOptionsUsage}`;

export const command: Command = {
  name: 'join',
  summary: 'join a fleet with a token and run this node',
  usage,
  async run(argv) {
    const { values, positionals } = parseOptions(argv, nodeOptions, usage, true);
    if (positionals.length !== 1) throw new CliError(`expected exactly one TOKEN\n\n${usage}`, 2);
    const dataDir = dataDirFrom(values);
    const existing = await dataDir.readFleet();
    let body: ReturnType<typeof decodeToken>;
    try {
      // Checked before any network activity: a bad token never reaches the fleet.
      body = decodeToken(positionals[0]!, {
        now: Date.now(),
        ...(existing ? { expectFleet: { fleet: existing.fleet, psk: existing.psk } } : {}),
      });
    } catch (err) {
      if (err instanceof TokenError) throw new CliError(`cannot join: ${err.message}`);
      throw err;
    }
    await dataDir.ensure();
    await dataDir.identity();
    const fleet = {
      fleet: body.fleet,
      psk: body.psk,
      bootstrap: body.bootstrap,
      since: existing?.since ?? Date.now(),
    };
    const config = mergeConfig(await dataDir.readConfig(), values);
    await dataDir.writeFleet(fleet);
    await dataDir.writeConfig(config);
    return runDaemonForeground(dataDir, fleet, config);
  },
};
