import { findCommand, helpText } from './command-table.ts';

/** Where the CLI writes. */
export interface CliOutput {
  /** Writes to standard output. */
  stdout(text: string): void;
  /** Writes to standard error. */
  stderr(text: string): void;
}

/**
 * Runs `vtnode ARGV`: help, the version, or the named command (loaded only then); resolves to the
 * exit code. A command's refusal is thrown (CliError and the like), for the caller to print.
 */
export async function dispatch(argv: readonly string[], out: CliOutput): Promise<number> {
  const [name, ...rest] = argv;
  // No command is a usage error, like an unknown one: help on stderr, exit 2 (stdout stays clean for
  // scripts). Help asked for is the output: stdout, exit 0.
  if (name === undefined) {
    out.stderr(helpText());
    return 2;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    out.stdout(helpText());
    return 0;
  }
  if (name === '--version' || name === '-v') {
    const { VTNODE_VERSION } = await import('../protocol/version.ts');
    out.stdout(`${VTNODE_VERSION}\n`);
    return 0;
  }
  const entry = findCommand(name);
  if (!entry) {
    out.stderr(`vtnode: unknown command "${name}"\n\n${helpText()}`);
    return 2;
  }
  const { command: cmd } = await entry.load();
  if (rest.includes('--help') || rest.includes('-h')) {
    out.stdout(`${cmd.usage}\n`);
    return 0;
  }
  return await cmd.run(rest);
}
