import { CliError, type Command, parseOptions } from '../command.ts';
import { dataDirFrom, mergeConfig, nodeOptions, nodeOptionsUsage } from '../node-options.ts';
import { expandUiFlag, uiOptions, uiOptionsUsage, uiSettings } from '../ui.ts';

const usage = `Usage: vtnode start [--ui [PORT]] [node options]

Runs a node that has joined a fleet (or created one with \`vtnode init\`) in the foreground, with the
options saved in its data dir; options given here replace the saved ones.
${nodeOptionsUsage}
${uiOptionsUsage}`;

export const command: Command = {
  name: 'start',
  summary: 'run this node (after init or join)',
  usage,
  async run(argv) {
    const { values } = parseOptions(expandUiFlag(argv), { ...nodeOptions, ...uiOptions }, usage);
    const ui = uiSettings(values);
    const dataDir = dataDirFrom(values);
    const fleet = await dataDir.readFleet();
    if (!fleet) {
      throw new CliError(
        `${dataDir.root} is not in a fleet: run \`vtnode init --fleet NAME\` or \`vtnode join TOKEN\` first`,
      );
    }
    const config = mergeConfig(await dataDir.readConfig(), values);
    await dataDir.writeConfig(config);
    // The node's modules (libp2p, gossipsub, openai) load only when it starts: `--help` stays light.
    const { runDaemonForeground } = await import('../run-daemon.ts');
    return runDaemonForeground(dataDir, fleet, config, { ui });
  },
};
