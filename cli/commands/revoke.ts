import { connectControl, NoDaemonError } from '../../node/control/client.ts';
import type { RevokeResult } from '../../node/membership/admin.ts';
import { CliError, type Command } from '../command.ts';
import { dataDirFrom } from '../node-options.ts';
import { commandLine, DATA_DIR, flag, group, usageError } from '../options.ts';

const line = commandLine({
  prose: `Usage: vtnode revoke PEER|INVITATION [--data-dir DIR] [--json]

Revokes a member (by peer id) or a join token's invitation (by its nonce, as \`vtnode token --json\`
prints it), on the running node that holds the fleet key. Revoking a member also revokes the
invitation it joined with, so that token cannot admit it again under a new identity (members
already admitted with it keep their certificates). The signed revocation is gossiped and saved in
every data dir; every node disconnects the member and refuses it from then on.`,
  groups: [
    group('Options:', {
      'data-dir': DATA_DIR,
      json: flag({ doc: 'print the result as JSON' }),
    }),
  ],
  positionals: true,
});

export const command: Command = {
  name: 'revoke',
  summary: 'revoke a member or an invitation (on the fleet-key holder)',
  usage: line.usage,
  line,
  async run(argv) {
    const { values, positionals } = line.parse(argv);
    if (positionals.length !== 1) throw usageError('expected exactly one PEER or INVITATION', line.usage);
    const dataDir = dataDirFrom(values);
    let result: RevokeResult;
    try {
      const control = await connectControl(dataDir);
      result = await control.call<RevokeResult>('POST', '/members/revoke', { id: positionals[0] });
    } catch (err) {
      if (err instanceof NoDaemonError)
        throw new CliError(`${err.message}: revocations go out through the running node`);
      throw new CliError((err as Error).message.replace(/^daemon: /, ''));
    }
    if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else
      process.stderr.write(
        `${result.revoked.map((r) => `revoked ${r.kind} ${r.id}`).join('\n')}\nrevocation list: ${result.version} entries\n`,
      );
    return 0;
  },
};
