import type { DataDir, FleetFile, NodeConfig } from '../../node/data-dir.ts';
import { decodeToken, TokenError } from '../../protocol/token.ts';
import { CliError, type Command, parseOptions } from '../command.ts';
import { dataDirFrom, mergeConfig, nodeOptions, nodeOptionsUsage } from '../node-options.ts';
import { runDaemonForeground } from '../run-daemon.ts';

const usage = `Usage: vtnode join TOKEN [node options]

Joins the fleet a token names and runs this node in the foreground (Ctrl-C leaves). The token is
saved in the data dir: later, \`vtnode start\` brings the node back with the same identity.
${nodeOptionsUsage}`;

/**
 * What `vtnode join` does before the node runs: the token checked (before any network activity: a bad
 * token never reaches the fleet), then saved with the options in the data dir.
 */
export async function prepareJoin(
  argv: string[],
): Promise<{ dataDir: DataDir; fleet: FleetFile; config: NodeConfig }> {
  const { values, positionals } = parseOptions(argv, nodeOptions, usage, true);
  if (positionals.length !== 1) throw new CliError(`expected exactly one TOKEN\n\n${usage}`, 2);
  const dataDir = dataDirFrom(values);
  const existing = await dataDir.readFleet();
  let body: ReturnType<typeof decodeToken>;
  try {
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
  return { dataDir, fleet, config };
}

export const command: Command = {
  name: 'join',
  summary: 'join a fleet with a token and run this node',
  usage,
  async run(argv) {
    const { dataDir, fleet, config } = await prepareJoin(argv);
    return runDaemonForeground(dataDir, fleet, config);
  },
};
