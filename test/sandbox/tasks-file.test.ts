// A missing or unreadable input file reaches the user as a sentence naming it, never a raw errno
// (issue 28, finding 17: calibrate and score printed `ENOENT: no such file or directory, open …`).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTasksFile, unreadable } from '../../sandbox/tasks-file.ts';
import { vtnode } from '../helpers/cli.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-tasks-file-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('input files', () => {
  it('says what is wrong with the file, by errno', () => {
    const e = (code: string) => Object.assign(new Error(`${code}: raw`), { code });
    expect(unreadable('tasks file', '/x.jsonl', e('ENOENT'))).toBe('the tasks file /x.jsonl does not exist');
    expect(unreadable('tasks file', '/x', e('EISDIR'))).toBe('/x is a folder, not the tasks file');
    expect(unreadable('candidate file', '/c.ts', e('EACCES'))).toBe(
      'cannot read the candidate file /c.ts: permission denied',
    );
    expect(unreadable('tasks file', '/x', e('EIO'))).toBe('cannot read the tasks file /x: EIO: raw');
  });

  it('readTasksFile names a missing file and a folder, and still names a bad line', async () => {
    await expect(readTasksFile(join(dir, 'none.jsonl'))).rejects.toThrow(
      `the tasks file ${join(dir, 'none.jsonl')} does not exist (\`vtnode mine --out FILE\` writes one)`,
    );
    await expect(readTasksFile(dir)).rejects.toThrow(`${dir} is a folder, not the tasks file`);
    await writeFile(join(dir, 'bad.jsonl'), '{"id": 1}\n');
    await expect(readTasksFile(join(dir, 'bad.jsonl'))).rejects.toThrow(`${join(dir, 'bad.jsonl')}:1`);
  });

  it('calibrate and score say it on the command line, without a stack trace', async () => {
    const missing = join(dir, 'missing.jsonl');
    const cal = await vtnode(['calibrate', '--tasks', missing, '--out', join(dir, 'out.jsonl')]);
    expect(cal.code).toBe(1);
    expect(cal.stderr).toBe(
      `vtnode: the tasks file ${missing} does not exist (\`vtnode mine --out FILE\` writes one)\n`,
    );
    const score = await vtnode([
      'score',
      '--tasks',
      missing,
      '--task',
      't',
      '--candidate',
      join(dir, 'c.ts'),
    ]);
    expect(score.code).toBe(1);
    expect(score.stderr).not.toMatch(/ENOENT|\n\s+at /);
  }, 60_000);
});
