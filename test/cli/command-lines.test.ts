// Every command's command line comes from its one declaration (issue 12, build 8): `<cmd> --help`
// through the table shows the usage generated from it, the usage lists exactly the options the command
// parses, and a bad number for any numeric flag is a usage error naming that flag. In-process: no spawn.
import { describe, expect, it } from 'vitest';
import { CliError, type Command } from '../../cli/command.ts';
import { COMMANDS } from '../../cli/command-table.ts';
import { dispatch, nearestCommand } from '../../cli/dispatch.ts';
import { NODE_OPTIONS } from '../../cli/node-options.ts';
import { DATA_DIR, flagOf, type OptionSpec } from '../../cli/options.ts';
import { UI_OPTIONS } from '../../cli/ui.ts';

async function loadAll(): Promise<Command[]> {
  return Promise.all(COMMANDS.map(async (row) => (await row.load()).command));
}

/** Runs `vtnode ARGV` in-process: the exit code and what was written, or the refusal thrown. */
async function cli(argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await dispatch(argv, {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
  });
  return { code, stdout, stderr };
}

/** The flags a usage text lists as option rows (`  -k N  doc`, `  -h, --help  doc`), in order. */
function listedFlags(usage: string): string[] {
  const flags: string[] = [];
  for (const line of usage.split('\n')) {
    const m = /^ {2}(?:-([a-zA-Z]), )?(--?[a-z][\w-]*)(?=[ ]|$)/.exec(line);
    if (m) flags.push(m[2]!);
  }
  return flags;
}

/** A valid value for a required option (so that parsing reaches the option under test). */
function validValue(s: OptionSpec): string {
  if (s.choices) return s.choices[0]!;
  if (s.numeric) return '1';
  return 'x';
}

describe('every command line, from its declaration', () => {
  it('`vtnode <cmd> --help` (and -h) prints the generated usage on stdout, exit 0', async () => {
    for (const command of await loadAll()) {
      expect(command.usage, command.name).toBe(command.line.usage);
      for (const help of ['--help', '-h']) {
        const r = await cli([command.name, help]);
        expect({ name: command.name, code: r.code, stderr: r.stderr }).toEqual({
          name: command.name,
          code: 0,
          stderr: '',
        });
        expect(r.stdout).toBe(`${command.usage}\n`);
      }
      expect(command.usage, command.name).toMatch(new RegExp(`^Usage: vtnode ${command.name}\\b`));
    }
  }, 60_000);

  it('each usage lists exactly the options its command parses, once each, and -h, --help (no drift)', async () => {
    for (const command of await loadAll()) {
      const parsed = Object.keys(command.line.table).map(flagOf);
      const listed = listedFlags(command.usage);
      expect(listed.sort(), command.name).toEqual([...parsed, '--help'].sort());
    }
  }, 60_000);

  it('a bad number for any numeric flag fails with exit 2, naming the flag, before the command does anything', async () => {
    let checked = 0;
    for (const command of await loadAll()) {
      const table = command.line.table;
      const required = (skip: string) =>
        Object.entries(table)
          .filter(([name, s]) => s.required && name !== skip)
          .flatMap(([name, s]) => [flagOf(name), validValue(s)]);
      for (const [name, s] of Object.entries(table)) {
        if (!s.numeric) continue;
        for (const bad of ['abc', '1e999', '']) {
          // A bare-capable option (`--ui [PORT]`) takes a value only after `=`; empty is its bare form.
          const value = s.bare !== undefined ? bad || 'x' : bad;
          const given = s.bare !== undefined ? [`${flagOf(name)}=${value}`] : [flagOf(name), value];
          const argv = [command.name, ...required(name), ...given];
          const err = await cli(argv).then(
            () => null,
            (e: unknown) => e,
          );
          expect(err, argv.join(' ')).toBeInstanceOf(CliError);
          expect((err as CliError).exitCode, argv.join(' ')).toBe(2);
          expect((err as CliError).message, argv.join(' ')).toMatch(
            new RegExp(
              `^${flagOf(name)} must be .*, got "${value}"\\n\\n${escapeRegExp(command.usage.split('\n')[0]!)}`,
            ),
          );
        }
        checked++;
      }
    }
    // run, model-server, mine, demo, collect, node options...: dozens of numeric flags.
    expect(checked).toBeGreaterThan(40);
  }, 60_000);

  it('a missing required option and an unknown flag fail with exit 2 and the usage', async () => {
    for (const command of await loadAll()) {
      const unknown = await cli([command.name, '--no-such-flag']).then(
        () => null,
        (e: unknown) => e,
      );
      expect(unknown, command.name).toBeInstanceOf(CliError);
      expect((unknown as CliError).exitCode).toBe(2);
      expect((unknown as CliError).message).toMatch(/^Unknown option '--no-such-flag'/);
      expect((unknown as CliError).message.endsWith(`\n\n${command.usage}`)).toBe(true);
      const required = Object.entries(command.line.table).filter(([, s]) => s.required);
      if (required.length === 0) continue;
      const missing = await cli([command.name]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(missing, command.name).toBeInstanceOf(CliError);
      expect((missing as CliError).message, command.name).toMatch(
        new RegExp(`^${flagOf(required[0]![0])} [A-Z|a-z-]+ is required\\n\\n`),
      );
    }
  }, 60_000);

  it('shared options are declared once: the node, web view and --data-dir declarations are the same objects', async () => {
    const byName = new Map((await loadAll()).map((c) => [c.name, c]));
    for (const name of ['init', 'join', 'start', 'collect'])
      for (const [flag, s] of Object.entries(NODE_OPTIONS.options))
        expect(byName.get(name)!.line.table[flag], `${name} ${flag}`).toBe(s);
    for (const name of ['join', 'start', 'collect'])
      for (const [flag, s] of Object.entries(UI_OPTIONS.options))
        expect(byName.get(name)!.line.table[flag], `${name} ${flag}`).toBe(s);
    for (const c of byName.values()) {
      const dataDir = c.line.table['data-dir'];
      if (dataDir) expect(dataDir, c.name).toBe(DATA_DIR);
    }
  }, 60_000);
});

describe('an unknown command (issue 28, finding 16)', () => {
  it('says which command was likely meant (a typo, a transposition, a prefix), exit 2 with the help', async () => {
    for (const [typed, meant] of [
      ['strat', 'start'],
      ['jion', 'join'],
      ['colect', 'collect'],
      ['stat', 'status'],
      ['doc', 'doctor'],
      ['Rn', 'run'],
    ]) {
      const r = await cli([typed!]);
      expect(r.code).toBe(2);
      expect(r.stderr.split('\n')[0]).toBe(`vtnode: unknown command "${typed}" (did you mean "${meant}"?)`);
      expect(r.stderr).toContain('Commands:');
      expect(await nearestCommand(typed!)).toBe(meant);
    }
    // Nothing close: no guess.
    for (const typed of ['xyzzy', 'ls', 'deploy']) {
      expect(await nearestCommand(typed)).toBeNull();
      expect((await cli([typed])).stderr.split('\n')[0]).toBe(`vtnode: unknown command "${typed}"`);
    }
  });
});

describe('words declared in the CLI (kept light) match the schemas they stand for', () => {
  it("model-server's --emulate and --script words are the emulator's enums", async () => {
    const { EMULATE_KINDS, SCRIPT_MODES } = await import('../../cli/commands/model-server.ts');
    const { EmulateKind } = await import('../../node/model-server/flavours.ts');
    const { ScriptMode } = await import('../../node/model-server/script.ts');
    expect([...EMULATE_KINDS]).toEqual(EmulateKind.options);
    expect([...SCRIPT_MODES]).toEqual(ScriptMode.options);
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
