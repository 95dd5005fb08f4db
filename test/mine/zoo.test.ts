// The fixture zoo (test/fixtures/zoo): layouts real repositories have, each mined with mine() and
// calibrated in the real sandbox (the reference of every task scores 1.0). The fixtures are installed
// by .ci/run (npm ci, pnpm and yarn through npx); a missing install fails here with the command to run.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MineError, mine, type TaskKind } from '../../node/tasks/mine.ts';
import { workspaceId } from '../../node/workspace/content-id.ts';
import type { Task } from '../../protocol/task.ts';
import { createCheckedScorer, type Scorer } from '../../sandbox/scorer.ts';
import { checkWorkspaceReady, describeReadiness } from '../../sandbox/workspace-ready.ts';
import { cleanupTemp, copyTree, repoRoot, tempDir, vtnode } from './helpers.ts';

const ZOO = join(repoRoot, 'test/fixtures/zoo');

interface Layout {
  /** Fixture-relative root to mine. */
  root: string;
  /** Targets (root-relative) every mine must produce, by kind. */
  expected: Record<TaskKind, string[]>;
  /** Tasks calibrated in the sandbox (all when absent): vitest runs are slow on a shared machine. */
  calibrate?: (t: Task) => boolean;
}

const LAYOUTS: Layout[] = [
  {
    // A member mined on its own: vitest and @zoo/core are hoisted to the monorepo root.
    root: 'npm-workspaces/packages/app',
    expected: { file: ['src/total.js'], tests: ['test/total.test.js'] },
  },
  {
    // Its tsconfig extends the root's, whose `paths` the member's vitest.config mirrors.
    root: 'npm-workspaces/packages/paths',
    expected: { file: ['src/slug.js'], tests: ['test/slug.test.js'] },
    calibrate: (t) => t.kind === 'file',
  },
  {
    // The monorepo root: the member with its own vitest.config runs from its folder (judge.cwd).
    root: 'npm-workspaces',
    expected: {
      file: ['packages/app/src/total.js', 'packages/core/src/sum.js', 'packages/paths/src/slug.js'],
      tests: [
        'packages/app/test/total.test.js',
        'packages/core/test/sum.test.js',
        'packages/paths/test/slug.test.js',
      ],
    },
    calibrate: (t) => t.judge.cwd !== undefined && t.kind === 'file',
  },
  {
    root: 'pnpm-workspace',
    expected: {
      file: ['packages/parity/src/index.js', 'packages/report/src/report.js'],
      tests: ['packages/parity/test/parity.test.js', 'packages/report/test/report.test.js'],
    },
  },
  {
    root: 'pnpm-workspace/packages/report',
    expected: { file: ['src/report.js'], tests: ['test/report.test.js'] },
    calibrate: (t) => t.kind === 'file',
  },
  {
    root: 'yarn1-workspaces/packages/fmt',
    expected: { file: ['src/money.js'], tests: ['test/money.test.js'] },
  },
  {
    root: 'barrel-namespace',
    expected: {
      file: ['src/array/chunk.ts', 'src/array/uniq.ts', 'src/string/pad.ts'],
      tests: ['test/chunk.test.ts', 'test/pad.test.ts', 'test/uniq.test.ts'],
    },
  },
  {
    root: 'barrel-wrappers',
    expected: {
      file: ['src/hsl/definition.js', 'src/index.js', 'src/modes.js', 'src/rgb/definition.js'],
      tests: ['test/hsl.test.js', 'test/rgb.test.js'],
    },
  },
];

let scorer: Scorer;
beforeAll(async () => {
  for (const fixture of ['npm-workspaces', 'pnpm-workspace', 'yarn1-workspaces']) {
    const ready = checkWorkspaceReady({ workspace: join(ZOO, fixture) });
    if (!ready.ok)
      throw new Error(`fixture not installed (see .ci/run): ${describeReadiness(fixture, ready)}`);
  }
  scorer = await createCheckedScorer({ workspaceId });
}, 120_000);
afterAll(async () => {
  await scorer?.close();
  await cleanupTemp();
});

describe.each(LAYOUTS)('zoo: $root', (layout) => {
  let tasks: Task[] = [];

  it('mines a task for every source a test reaches and every test', async () => {
    const result = await mine({ root: join(ZOO, layout.root) });
    tasks = result.tasks;
    for (const kind of ['file', 'tests'] as const)
      expect(
        tasks
          .filter((t) => t.kind === kind)
          .map((t) => t.target)
          .sort(),
        kind,
      ).toEqual(layout.expected[kind]);
    expect(result.summary.leakage).toBe(0);
  });

  it('calibrates: the reference of every task scores 1.0 in the sandbox', async () => {
    const chosen = tasks.filter(layout.calibrate ?? (() => true));
    expect(chosen.length).toBeGreaterThan(0);
    for (const task of chosen) {
      const workspaceDir = join(ZOO, layout.root);
      const reference = await readFile(join(workspaceDir, task.target), 'utf8');
      const r = await scorer.score({ task, workspaceDir, candidate: reference });
      expect({ task: task.id, reward: r.reward, reasons: r.reasons }).toEqual({
        task: task.id,
        reward: 1,
        reasons: [],
      });
    }
  }, 600_000);
});

describe('zoo: an uninstalled copy', () => {
  it('mine refuses with the install command; score --json carries the refusal on stdout', async () => {
    const copy = await copyTree(join(ZOO, 'npm-workspaces'));
    const member = join(copy, 'packages/app');
    await expect(mine({ root: member })).rejects.toThrow(MineError);
    await expect(mine({ root: member })).rejects.toThrow(
      new RegExp(`vitest is not installed.*Run \`npm ci\` in ${copy}`),
    );
    const { tasks } = await mine({ root: member, installCheck: false, kinds: ['file'] });
    const dir = await tempDir();
    const tasksFile = join(dir, 'tasks.jsonl');
    await writeFile(tasksFile, tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
    await writeFile(join(dir, 'candidate.js'), 'export const total = () => 0;\n');
    const r = await vtnode([
      'score',
      '--tasks',
      tasksFile,
      '--task',
      tasks[0]!.id,
      '--candidate',
      join(dir, 'candidate.js'),
      '--json',
    ]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({
      error: expect.stringMatching(/cannot run its tests.*npm ci/),
      exitCode: 1,
    });
    expect(r.stderr).not.toMatch(/\n\s+at /);
    const cal = await vtnode(['calibrate', '--tasks', tasksFile, '--out', join(dir, 'kept.jsonl'), '--json']);
    expect(cal.code).toBe(1);
    expect(JSON.parse(cal.stdout).error).toMatch(/vitest is not installed/);
    // A node refuses to start (and advertise) a workspace that cannot run its tests.
    const dataDir = join(dir, 'node');
    expect((await vtnode(['init', '--fleet', 'zoo', '--data-dir', dataDir])).code).toBe(0);
    const start = await vtnode([
      'start',
      '--data-dir',
      dataDir,
      '--workspace',
      member,
      '--listen',
      '/ip4/127.0.0.1/tcp/0',
    ]);
    expect(start.code).toBe(1);
    expect(start.stderr).toMatch(/packages\/app cannot run its tests: .*Run `npm ci` in/);
  }, 120_000);
});
