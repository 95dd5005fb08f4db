import { sleep } from '../../node/async/sleep.ts';
import { connectControl, NoDaemonError } from '../../node/control/client.ts';
import { pidAlive } from '../../sandbox/pid.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';
import { commandLine, DATA_DIR, group } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode leave [--data-dir DIR]

Stops the running node of the data dir gracefully: it tells the fleet it is leaving, saves what it
knows of its peers, and exits. Its identity and fleet membership stay: \`vtnode start\` brings it back.`,
  groups: [group('Options:', { 'data-dir': DATA_DIR })],
});

export const command: Command = {
  name: 'leave',
  summary: 'stop the running node gracefully',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const dataDir = dataDirFrom(values);
    const controlFile = await dataDir.readControl();
    try {
      const control = await connectControl(dataDir);
      await control.call('POST', '/leave');
    } catch (err) {
      if (!(err instanceof NoDaemonError)) throw err;
      // Nothing to stop is what was asked for: exit 0, as `systemctl stop` does (teardown scripts).
      process.stderr.write(`no vtnode daemon is running for ${dataDir.root}: nothing to stop\n`);
      return 0;
    }
    const deadline = Date.now() + 15_000;
    while (controlFile && pidAlive(controlFile.pid) && Date.now() < deadline) {
      await sleep(100);
    }
    if (controlFile && pidAlive(controlFile.pid))
      throw new CliError(`the node (pid ${controlFile.pid}) did not stop within 15 s`);
    process.stderr.write('the node has left the fleet\n');
    return 0;
  },
};
