import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { REPO } from '../helpers/cli.ts';

/** Every module specifier resolved while importing `file` (a fresh Node process, resolve hooks). */
async function specifiersLoadedBy(file: string): Promise<string[]> {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = [];
    registerHooks({ resolve(specifier, context, next) { seen.push(specifier); return next(specifier, context); } });
    await import(${JSON.stringify(file)});
    process.stdout.write(JSON.stringify(seen));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    cwd: REPO,
    timeout: 30_000,
  });
  return JSON.parse(stdout) as string[];
}

describe('commands load lazily', () => {
  for (const name of ['doctor', 'service']) {
    it(`cli/commands/${name}.ts loads neither libp2p nor the daemon until it runs`, async () => {
      const seen = await specifiersLoadedBy(join(REPO, 'cli', 'commands', `${name}.ts`));
      expect(seen.length).toBeGreaterThan(0); // the hook saw the command's own imports
      expect(seen.filter((s) => /libp2p|@chainsafe|@multiformats|daemon|openai|typescript/.test(s))).toEqual(
        [],
      );
    });
  }
});
