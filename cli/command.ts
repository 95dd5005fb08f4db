import type { CommandLine } from './options.ts';

/** One `vtnode` sub-command. Each file in cli/commands/ exports `command`. */
export interface Command {
  /** Name typed after `vtnode`. */
  name: string;
  /** One line for `vtnode help`. */
  summary: string;
  /** Full usage text for `vtnode <name> --help` (the command line's usage). */
  usage: string;
  /** The command's declared options: its parser and the source of its usage text. */
  line: CommandLine;
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
