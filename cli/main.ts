import { StorageError } from '../node/storage/errors.ts';
import { CliError } from './command.ts';
import { findCommand, helpText } from './command-table.ts';

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  // No command is a usage error, like an unknown one: help on stderr, exit 2 (stdout stays clean for
  // scripts). Help asked for is the output: stdout, exit 0.
  if (name === undefined) {
    process.stderr.write(helpText());
    return 2;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(helpText());
    return 0;
  }
  if (name === '--version' || name === '-v') {
    const { VTNODE_VERSION } = await import('../protocol/version.ts');
    process.stdout.write(`${VTNODE_VERSION}\n`);
    return 0;
  }
  const entry = findCommand(name);
  if (!entry) {
    process.stderr.write(`vtnode: unknown command "${name}"\n\n${helpText()}`);
    return 2;
  }
  const { command: cmd } = await entry.load();
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`${cmd.usage}\n`);
    return 0;
  }
  return await cmd.run(rest);
}

/** Exits once stdout has flushed (a libp2p timer or a model-server probe must not keep a finished command alive). */
function exit(code: number): void {
  process.stdout.write('', () => process.exit(code));
}

const argv = process.argv.slice(2);
main(argv).then(exit, (err: unknown) => {
  // A refusal (bad usage, a corrupt or full data file) is for the user: its message, no stack trace.
  if (err instanceof CliError || err instanceof StorageError) {
    const exitCode = err instanceof CliError ? err.exitCode : 1;
    process.stderr.write(`vtnode: ${err.message}\n`);
    // A script asked for JSON: the refusal is JSON on stdout too, never an empty stdout.
    if (argv.includes('--json'))
      process.stdout.write(`${JSON.stringify({ error: err.message, exitCode })}\n`);
    exit(exitCode);
  } else {
    process.stderr.write(`vtnode: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    if (argv.includes('--json'))
      process.stdout.write(
        `${JSON.stringify({ error: err instanceof Error ? err.message : String(err), exitCode: 1 })}\n`,
      );
    exit(1);
  }
});
