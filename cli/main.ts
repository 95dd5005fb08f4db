import { StorageError } from '../node/storage/errors.ts';
import { CliError } from './command.ts';
import { dispatch } from './dispatch.ts';

function main(argv: string[]): Promise<number> {
  return dispatch(argv, {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
  });
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
