import { readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StorageError } from '../node/storage/errors.ts';
import { CliError, type Command } from './command.ts';

const commandsDir = join(dirname(fileURLToPath(import.meta.url)), 'commands');

async function loadCommand(name: string): Promise<Command | null> {
  if (!/^[a-z][a-z-]*$/.test(name)) return null;
  try {
    const mod = (await import(join(commandsDir, `${name}.ts`))) as { command: Command };
    return mod.command;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String(err).includes(`${name}.ts`))
      return null;
    throw err;
  }
}

async function help(): Promise<string> {
  const files = (await readdir(commandsDir)).filter((f) => f.endsWith('.ts')).sort();
  const rows: string[] = [];
  for (const f of files) {
    const cmd = await loadCommand(f.slice(0, -3));
    if (cmd) rows.push(`  ${cmd.name.padEnd(14)}${cmd.summary}`);
  }
  return `vtnode: verified training data from a fleet of Macs\n\nUsage: vtnode <command> [options]\n\nCommands:\n${rows.join('\n')}\n\nRun \`vtnode <command> --help\` for a command's options.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  // No command is a usage error, like an unknown one: help on stderr, exit 2 (stdout stays clean for
  // scripts). Help asked for is the output: stdout, exit 0.
  if (name === undefined) {
    process.stderr.write(await help());
    return 2;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(await help());
    return 0;
  }
  if (name === '--version' || name === '-v') {
    const { VTNODE_VERSION } = await import('../protocol/version.ts');
    process.stdout.write(`${VTNODE_VERSION}\n`);
    return 0;
  }
  const cmd = await loadCommand(name);
  if (!cmd) {
    process.stderr.write(`vtnode: unknown command "${name}"\n\n${await help()}`);
    return 2;
  }
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
