import { CliError, type Command } from '../command.ts';
import { dataDirFrom, mergeConfig, NODE_OPTIONS } from '../node-options.ts';
import { commandLine } from '../options.ts';
import { UI_OPTIONS, uiSettings } from '../ui.ts';

const line = commandLine({
  prose: `Usage: vtnode start [--ui [PORT]] [node options]

Runs a node that has joined a fleet (or created one with \`vtnode init\`) in the foreground, with the
options saved in its data dir; options given here replace the saved ones.`,
  groups: [NODE_OPTIONS, UI_OPTIONS],
});

export const command: Command = {
  name: 'start',
  summary: 'run this node (after init or join)',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
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
