// Numbers the old per-command parsers let through (issue 12, build 8): Number() read '' as 0, '0x10'
// as 16, '1e3' as 1000 and ' 5' as 5, and some commands quietly replaced a 0 by a default. Each is a
// usage error now (exit 2, naming the flag) before the command touches anything. In-process.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError } from '../../cli/command.ts';
import { findCommand } from '../../cli/command-table.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-opts-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Runs a command in-process; resolves to its refusal (or a marker when it did not refuse). */
async function refusal(argv: string[]): Promise<{ exitCode: number; message: string }> {
  const [name, ...rest] = argv;
  const { command } = await findCommand(name!)!.load();
  try {
    const code = await command.run(rest);
    return { exitCode: code, message: '(ran)' };
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    return { exitCode: err.exitCode, message: err.message };
  }
}

describe('a number the old parsers misread is a usage error naming its flag', () => {
  const cases: [string[], string][] = [
    // run: '' was temperature 0 and top-p 0 (Number('') === 0); 0x10 was 16 samples; 0 tokens was 4096.
    [['run', '--temperature', ''], '--temperature'],
    [['run', '--top-p', ''], '--top-p'],
    [['run', '-k', '0x10'], '-k'],
    [['run', '-k', ' 8'], '-k'],
    [['run', '--seed', '1e3'], '--seed'],
    [['run', '--max-tokens', '0'], '--max-tokens'],
    [['run', '--max-attempts', '0x5'], '--max-attempts'],
    // model-server: '' was time-scale 0 (no delays at all); concurrency and context 0 became 1.
    [['model-server', '--time-scale', ''], '--time-scale'],
    [['model-server', '--concurrency', '0'], '--concurrency'],
    [['model-server', '--context', '0'], '--context'],
    [['model-server', '--port', '0x50'], '--port'],
    // report, mine: hexadecimal and exponent forms.
    [['report', '--from', 'nowhere', '-k', '0x2'], '-k'],
    [['mine', '--max-context', '1e3'], '--max-context'],
  ];
  for (const [argv, flag] of cases) {
    it(`${argv.join(' ')} → exit 2, ${flag}`, async () => {
      const extra =
        argv[0] === 'run'
          ? ['--tasks', join(dir, 't.jsonl'), '--model', 'm', '--data-dir', join(dir, 'node')]
          : argv[0] === 'model-server'
            ? [
                '--emulate',
                'ollama',
                '--tasks',
                join(dir, 'missing.jsonl'),
                ...(argv.includes('--port') ? [] : ['--port', '0']),
              ]
            : argv[0] === 'mine'
              ? ['--root', join(dir, 'no-repo'), '--out', join(dir, 'tasks.jsonl')]
              : [];
      const r = await refusal([...argv, ...extra]);
      expect(r.exitCode, r.message).toBe(2);
      expect(r.message.split('\n')[0]).toMatch(new RegExp(`^${flag} must be `));
    });
  }

  it('init refuses --max-jobs 0x10 before it writes anything', async () => {
    const dataDir = join(dir, 'init-node');
    const r = await refusal(['init', '--fleet', 'f', '--data-dir', dataDir, '--max-jobs', '0x10']);
    expect(r.exitCode, r.message).toBe(2);
    expect(r.message).toMatch(/^--max-jobs must be a whole number from 1 to 64, got "0x10"/);
  });
});
