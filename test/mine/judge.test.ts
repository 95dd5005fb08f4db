import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { type MineResult, mine } from '../../node/tasks/mine.ts';
import { ledgerRoot } from './helpers.ts';

const run = promisify(execFile);

/** Runs a judge argv the way the scorer does: cwd = the workspace, node_modules/.bin first on PATH. */
async function judgeRun(argv: string[]): Promise<{ code: number; output: string }> {
  const bin = join(ledgerRoot, 'node_modules/.bin');
  try {
    const { stdout, stderr } = await run(argv[0]!, argv.slice(1), {
      cwd: ledgerRoot,
      env: { ...process.env, PATH: `${bin}:${process.env['PATH']}`, CI: '1', NO_COLOR: '1' },
      timeout: 120_000,
    });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

let result: MineResult;
beforeAll(async () => {
  if (!existsSync(join(ledgerRoot, 'node_modules/.bin/vitest')))
    throw new Error(`examples/ledger has no node_modules: run \`npm ci\` in ${ledgerRoot}`);
  result = await mine({ root: ledgerRoot });
});

describe('judge specs of the example corpus run against the reference', () => {
  it('passes the type-check every task names', async () => {
    const argvs = new Set(result.tasks.map((t) => JSON.stringify(t.judge.typecheck)));
    expect([...argvs]).toEqual([JSON.stringify(['tsc', '--noEmit', '-p', 'tsconfig.json'])]);
    const r = await judgeRun(['tsc', '--noEmit', '-p', 'tsconfig.json']);
    expect(r.output).toBe('');
    expect(r.code).toBe(0);
  });

  it('passes the test files of a file task, and only those run', async () => {
    const t = result.tasks.find((x) => x.kind === 'file' && x.target === 'src/reports/income.ts')!;
    const r = await judgeRun(['vitest', 'run', ...t.judge.testFiles]);
    expect(r.code, r.output).toBe(0);
    expect(r.output).toMatch(/Test Files\s+1 passed \(1\)/);
  });

  it('passes the masked test file of a tests task', async () => {
    const t = result.tasks.find(
      (x) => x.kind === 'tests' && x.target === 'src/journal/journal.reverse.test.ts',
    )!;
    const r = await judgeRun(['vitest', 'run', ...t.judge.testFiles]);
    expect(r.code, r.output).toBe(0);
    expect(r.output).toMatch(/Tests\s+3 passed \(3\)/);
  });
});
