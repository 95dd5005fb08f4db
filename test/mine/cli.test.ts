import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseJsonWith } from '../../protocol/parse.ts';
import { Task } from '../../protocol/task.ts';
import { cleanupTemp, ledgerRoot, makeRepo, tempDir, vitestPackage, vtnode } from './helpers.ts';

afterAll(cleanupTemp);

const testFile = (imports: string, body: string) =>
  `import { expect, it } from 'vitest';\n${imports}\nit('works', () => {\n  ${body}\n});\n`;

describe('vtnode mine', () => {
  it('mines the bundled example corpus by default and prints the JSON summary', async () => {
    const dir = await tempDir();
    const out = join(dir, 'tasks.jsonl');
    const r = await vtnode(['mine', '--out', out, '--json', '--eval-modules', 'dates']);
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.code).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(summary.root).toBe(ledgerRoot);
    expect(summary.tasks).toBe(33);
    expect(summary.byKind).toEqual({ file: 17, tests: 16 });
    expect(summary.bySplit).toEqual({ train: 31, eval: 2 });
    expect(summary.leakage).toBe(0);
    expect(summary.skipped.map((s: { path: string }) => s.path)).toEqual([
      'src/index.ts',
      'src/util/assert.ts',
    ]);
    expect(summary.out).toBe(out);
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(33);
    const tasks = lines.map((l, i) => parseJsonWith(Task, l, `${out}:${i + 1}`));
    expect(tasks.filter((t) => t.split === 'eval').map((t) => t.target)).toEqual([
      'src/dates/period.ts',
      'src/dates/period.test.ts',
    ]);
  });

  it('prints a human summary with modules, skipped files and leakage', async () => {
    const dir = await tempDir();
    const r = await vtnode(['mine', '--root', ledgerRoot, '--out', join(dir, 't.jsonl'), '--kinds', 'file']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^module\s+group\s+split\s+file\s+tests$/m);
    expect(r.stdout).toMatch(/^journal\s+accounts\+6\s+train\s+2\s+0$/m);
    expect(r.stdout).toContain('tasks: 17 (file 17, tests 0;');
    expect(r.stdout).toContain('src/util/assert.ts: shared helper');
    expect(r.stdout).toContain('leakage: 0');
  });

  it('documents the default root in its usage', async () => {
    const r = await vtnode(['mine', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--root REPO');
    expect(r.stdout).toContain('examples/ledger');
    expect(r.stdout).toContain('--deny-terms FILE');
  });

  it('rejects bad options with a clear message', async () => {
    const dir = await tempDir();
    const out = join(dir, 't.jsonl');
    const cases: [string[], RegExp][] = [
      [['--kinds', 'file,docs'], /--kinds takes file, tests/],
      [['--eval-fraction', '2'], /--eval-fraction must be a number in \[0, 1\]/],
      [['--eval-fraction', 'x'], /--eval-fraction must be a number/],
      [['--max-context', 'lots'], /--max-context must be a whole number ≥ 0, got "lots"/],
      [['--deny-terms', join(dir, 'missing.txt')], /--deny-terms .*missing\.txt: ENOENT/],
      [['--bogus'], /Unknown option '--bogus'/],
      [['--out', join(dir, 'no/such/dir/t.jsonl')], /folder .* does not exist/],
      [['--out', dir], /exists and is not a regular file/],
    ];
    for (const [args, message] of cases) {
      const r = await vtnode(['mine', '--out', out, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    const unknown = await vtnode(['mine', '--out', out, '--eval-modules', 'nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/unknown module\(s\): nope; modules: accounts, audit/);
    expect(existsSync(out)).toBe(false);
    // Nine CLI starts one after the other: a few seconds each on a loaded machine.
  }, 180_000);

  it('fails clearly on a root without tests', async () => {
    const root = await makeRepo({ 'package.json': vitestPackage, 'src/a.ts': 'export const a = 1;\n' });
    const out = join(root, 'tasks.jsonl');
    const r = await vtnode(['mine', '--root', root, '--out', out]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^vtnode: no test files under /m);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(existsSync(out)).toBe(false);
  });

  it('fails and writes nothing when the leakage check finds a leak', async () => {
    const root = await makeRepo({
      'package.json': vitestPackage,
      'src/a/a.ts': 'export const PI_ISH = 3.14159;\n',
      'src/a/a.test.ts': testFile("import { PI_ISH } from './a.ts';", 'expect(PI_ISH).toBeGreaterThan(3);'),
      'src/b/a.ts': 'export const PI_ISH = 3.14159;\n',
      'src/b/b.ts': "import { PI_ISH } from './a.ts';\nexport const twice = PI_ISH * 2;\n",
      'src/b/b.test.ts': testFile("import { twice } from './b.ts';", 'expect(twice).toBeGreaterThan(6);'),
    });
    const out = join(root, 'tasks.jsonl');
    const r = await vtnode([
      'mine',
      '--root',
      root,
      '--skip-install-check',
      '--out',
      out,
      '--eval-modules',
      'a',
      '--json',
    ]);
    expect(r.code).toBe(1);
    const summary = JSON.parse(r.stdout);
    expect(summary.leakage).toBe(1);
    expect(summary.out).toBeNull();
    expect(r.stderr).toContain('leakage check failed: 1 eval task(s)');
    expect(existsSync(out)).toBe(false);
  });

  it('fails when every candidate was skipped', async () => {
    const root = await makeRepo({
      'package.json': vitestPackage,
      'src/index.ts': "export * from './a.ts';\n",
      'src/a.ts': 'export const a = 1;\n',
      'src/a.test.ts': testFile("import { a } from './index.ts';", 'expect(a).toBe(1);'),
    });
    const out = join(root, 't.jsonl');
    const r = await vtnode(['mine', '--root', root, '--skip-install-check', '--out', out, '--kinds', 'file']);
    expect(r.code).toBe(0); // a.ts is mined through the barrel
    await writeFile(join(root, 'deny.txt'), 'export const a\n');
    const denied = await vtnode([
      'mine',
      '--root',
      root,
      '--skip-install-check',
      '--out',
      out,
      '--kinds',
      'file',
      '--deny-terms',
      join(root, 'deny.txt'),
    ]);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('no tasks mined: every candidate file was skipped');
    expect(denied.stdout).toContain('src/a.ts: contains a denied term');
    expect(denied.stdout).toContain('nothing written (no tasks)');
  });

  it('lists files refused by --deny-terms', async () => {
    const root = await makeRepo({
      'package.json': vitestPackage,
      'src/a.ts': '// ACME-CONFIDENTIAL\nexport const a = 1;\n',
      'src/a.test.ts': testFile("import { a } from './a.ts';", 'expect(a).toBe(1);'),
      'src/b.ts': 'export const b = 2 > 1 ? 2 : 0;\n',
      'src/b.test.ts': testFile("import { b } from './b.ts';", 'expect(b).toBe(2);'),
    });
    const terms = join(root, 'deny.txt');
    await writeFile(terms, '# confidential markers\n\nacme-confidential\n');
    const r = await vtnode([
      'mine',
      '--root',
      root,
      '--skip-install-check',
      '--out',
      join(root, 't.jsonl'),
      '--deny-terms',
      terms,
      '--json',
    ]);
    expect(r.code).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(summary.skipped).toContainEqual({
      path: 'src/a.ts',
      reason: 'contains a denied term (#1 of --deny-terms)',
    });
    expect(summary.tasks).toBe(2);
  });
});
