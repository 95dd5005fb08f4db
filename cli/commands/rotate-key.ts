import { connectControl, NoDaemonError } from '../../node/control/client.ts';
import type { RotateResult } from '../../node/membership/admin.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';
import { commandLine, DATA_DIR, duration, flag, group } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode rotate-key [--keep-psk | --keep-signing-key] [--switch-in 30s] [--data-dir DIR] [--json]

Re-keys the fleet from the running node that holds the fleet key: a new pre-shared key and a new
generation of the signing key (either can be kept). Every connected member receives the new keys
and its certificate under the new generation over the authenticated mesh; members that connect
before the switch get them too; at the switch time every node that has them switches (existing
connections stay up). Members not reached, old tokens and old certificates stop working at the
switch: issue new tokens with \`vtnode token\`.`,
  groups: [
    group('Options:', {
      'keep-psk': flag({ doc: 'keep the pre-shared key (rotate the signing key only)' }),
      'keep-signing-key': flag({ doc: 'keep the signing key (rotate the pre-shared key only)' }),
      'switch-in': duration({ doc: 'time until the switch', min: 1000, default: 30_000 }),
      'data-dir': DATA_DIR,
      json: flag({ doc: 'print { switchAt, gen, psk, reached, missed } as JSON' }),
    }),
  ],
});

export const command: Command = {
  name: 'rotate-key',
  summary: 're-key the fleet without losing its members (on the fleet-key holder)',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    if (values['keep-psk'] && values['keep-signing-key'])
      throw new CliError('--keep-psk and --keep-signing-key together leave nothing to rotate', 2);
    const switchInMs = values['switch-in'];
    const dataDir = dataDirFrom(values);
    let result: RotateResult;
    try {
      const control = await connectControl(dataDir);
      result = await control.call<RotateResult>('POST', '/members/rotate', {
        signingKey: !values['keep-signing-key'],
        psk: !values['keep-psk'],
        switchInMs,
      });
    } catch (err) {
      if (err instanceof NoDaemonError)
        throw new CliError(`${err.message}: the new keys go out through the running node`);
      throw new CliError((err as Error).message.replace(/^daemon: /, ''));
    }
    if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else {
      process.stderr.write(
        `switching at ${new Date(result.switchAt).toISOString()} to key generation ${result.gen}` +
          `${result.psk ? ' and a new pre-shared key' : ''}\n` +
          `reached ${result.reached.length} member(s)${result.missed.length > 0 ? `; NOT reached: ${result.missed.map((m) => `${m.peer} (${m.reason})`).join(', ')}` : ''}\n` +
          'old tokens stop working at the switch: issue new ones with `vtnode token`\n',
      );
    }
    return 0;
  },
};
