import type { DataDir, FleetFile, NodeConfig } from '../../node/data-dir.ts';
import { decodeToken, type TokenBody, TokenError } from '../../protocol/token.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom, mergeConfig, NODE_OPTIONS } from '../node-options.ts';
import { commandLine, usageError } from '../options.ts';
import { UI_OPTIONS, uiSettings } from '../ui.ts';

const line = commandLine({
  prose: `Usage: vtnode join TOKEN [--ui [PORT]] [node options]

Joins the fleet a token names and runs this node in the foreground (Ctrl-C leaves). The token's
signed invitation is checked here, then exchanged with a node holding the fleet key for a membership
certificate, renewed automatically while the node runs. Everything is saved in the data dir: later,
\`vtnode start\` brings the node back with the same identity and certificate.`,
  groups: [NODE_OPTIONS, UI_OPTIONS],
  positionals: true,
});

/**
 * Checks a join token (its key chain, the invitation's signature and expiry, and that it is for this
 * data dir's fleet, if it has one) before any network activity, and saves the fleet it names in the
 * data dir: a bad token never reaches the fleet. Used by `vtnode join` and `vtnode collect --token`.
 */
export async function acceptToken(dataDir: DataDir, text: string): Promise<FleetFile> {
  const existing = await dataDir.readFleet();
  let body: TokenBody;
  try {
    const genesis = existing?.keys[0]?.publicKey;
    body = await decodeToken(text, {
      now: Date.now(),
      ...(existing && genesis ? { expectFleet: { fleet: existing.fleet, genesis } } : {}),
    });
    if (existing && !genesis && existing.fleet !== body.fleet)
      throw new TokenError(
        'fleet',
        `the token is for fleet "${body.fleet}", but this data dir belongs to fleet "${existing.fleet}"; use another --data-dir`,
      );
  } catch (err) {
    if (err instanceof TokenError) throw new CliError(`cannot join: ${err.message}`);
    throw err;
  }
  await dataDir.ensure();
  await dataDir.identity();
  const fleet: FleetFile = {
    fleet: body.fleet,
    psk: body.psk,
    bootstrap: body.bootstrap,
    since: existing?.since ?? Date.now(),
    keys: body.keys,
    invitation: body.invitation,
    rekeyedAt: existing?.rekeyedAt ?? 0,
  };
  await dataDir.writeFleet(fleet);
  return fleet;
}

/** What `vtnode join` does before the node runs: the token checked and saved, the options saved. */
export async function prepareJoin(argv: string[]): Promise<{
  dataDir: DataDir;
  fleet: FleetFile;
  config: NodeConfig;
  ui: { host: string; port: number } | null;
}> {
  const { values, positionals } = line.parse(argv);
  const ui = uiSettings(values);
  if (positionals.length !== 1) throw usageError('expected exactly one TOKEN', line.usage);
  const dataDir = dataDirFrom(values);
  const fleet = await acceptToken(dataDir, positionals[0]!);
  const config = mergeConfig(await dataDir.readConfig(), values);
  await dataDir.writeConfig(config);
  return { dataDir, fleet, config, ui };
}

export const command: Command = {
  name: 'join',
  summary: 'join a fleet with a token and run this node',
  usage: line.usage,
  line,
  async run(argv) {
    const { dataDir, fleet, config, ui } = await prepareJoin(argv);
    // The node's modules (libp2p, gossipsub, openai) load only when it starts: `--help` stays light.
    const { runDaemonForeground } = await import('../run-daemon.ts');
    return runDaemonForeground(dataDir, fleet, config, { ui });
  },
};
