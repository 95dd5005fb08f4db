import { type ParseArgsConfig, parseArgs } from 'node:util';

/** One `vtnode` sub-command. Each file in cli/commands/ exports `command`. */
export interface Command {
  /** Name typed after `vtnode`. */
  name: string;
  /** One line for `vtnode help`. */
  summary: string;
  /** Full usage text for `vtnode <name> --help`. */
  usage: string;
  /** Runs the command with the arguments after its name; resolves to the exit code. */
  run(argv: string[]): Promise<number>;
}

/** An error meant for the user: printed without a stack trace. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/** node:util parseArgs in strict mode, with errors turned into CliErrors that show the usage. */
export function parseOptions<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  usage: string,
  allowPositionals = false,
) {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (err) {
    throw new CliError(`${(err as Error).message}\n\n${usage}`, 2);
  }
}

/** How an option is typed on the command line: `-k` for a one-letter option, `--max-tokens` otherwise. */
export function flagOf(name: string): string {
  return name.length === 1 ? `-${name}` : `--${name}`;
}

/** Parses a non-negative integer option, naming the option as it is typed on error. */
export function intOption(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < 0)
    throw new CliError(`${flagOf(name)} must be a non-negative integer, got "${value}"`, 2);
  return n;
}
