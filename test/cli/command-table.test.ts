import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS, findCommand, helpText } from '../../cli/command-table.ts';
import { REPO } from '../helpers/cli.ts';

describe('the command table', () => {
  const files = readdirSync(join(REPO, 'cli', 'commands'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.slice(0, -3))
    .sort();

  it('has one row per command module, in order', () => {
    expect(COMMANDS.map((c) => c.name)).toEqual(files);
  });

  it('each row loads its module, and names and sums it up as the module does', async () => {
    for (const row of COMMANDS) {
      const { command } = await row.load();
      expect({ name: command.name, summary: command.summary }).toEqual({
        name: row.name,
        summary: row.summary,
      });
    }
  }, 120_000);

  it('finds a command by its exact name only', () => {
    expect(findCommand('run')?.name).toBe('run');
    for (const bad of ['', 'Run', 'ru', 'run ', '../run', 'constructor', 'toString', '__proto__'])
      expect(findCommand(bad), bad).toBeUndefined();
  });

  it('help lists every command with its summary', () => {
    const help = helpText();
    for (const c of COMMANDS) expect(help).toContain(`  ${c.name.padEnd(14)}${c.summary}\n`);
  });
});
