import { COMMANDS, findCommand, helpText } from './command-table.ts';

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
    const near = await nearestCommand(name);
    const hint = near ? ` (did you mean "${near}"?)` : '';
    out.stderr(`vtnode: unknown command "${name}"${hint}\n\n${helpText()}`);
    return 2;
  }
  const { command: cmd } = await entry.load();
  if (rest.includes('--help') || rest.includes('-h')) {
    out.stdout(`${cmd.usage}\n`);
    return 0;
  }
  return await cmd.run(rest);
}

/**
 * The command a mistyped name most likely meant: the one it begins (3 letters at least, when only one
 * does), else the closest by edit distance within 2 (1 for names under 4 letters), else null. Loaded
 * only for an unknown command.
 */
export async function nearestCommand(typed: string): Promise<string | null> {
  const name = typed.toLowerCase();
  const prefixed = COMMANDS.filter((c) => name.length >= 3 && c.name.startsWith(name));
  if (prefixed.length === 1) return prefixed[0]!.name;
  // A CommonJS package: its exports object is the default export under Node and in the bundle alike.
  const { distance } = (await import('fastest-levenshtein')).default;
  let best: { name: string; d: number } | null = null;
  for (const c of COMMANDS) {
    const d = distance(name, c.name);
    if (!best || d < best.d) best = { name: c.name, d };
  }
  return best && best.d <= (name.length < 4 ? 1 : 2) ? best.name : null;
}
