// The judge compliance suite (judge-compliance.ts) run against every judge: vitest, node:test, jest
// (ts-jest), mocha (tsx, ESM TypeScript) and mocha (plain CommonJS + chai), each on its own fixture.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import type { TestRunner } from '../../protocol/task.ts';
import type { CaseStatus } from '../../sandbox/judges/verdict.ts';
import { createCheckedScorer, type Scorer } from '../../sandbox/scorer.ts';
import { JUDGE_FIXTURES, prepareFixtures } from './fixtures.ts';
import { type JudgeFixture, judgeCompliance } from './judge-compliance.ts';

interface FixtureSpec {
  name: string;
  runner: TestRunner;
  ext: 'ts' | 'js';
  todoStatus: CaseStatus;
  hookGuardedStatus: CaseStatus;
  loadFailureAbortsRun: boolean;
  testsTasks: boolean;
}

const FIXTURES: FixtureSpec[] = [
  {
    name: 'vitest',
    runner: 'vitest',
    ext: 'ts',
    todoStatus: 'todo',
    hookGuardedStatus: 'skipped',
    loadFailureAbortsRun: false,
    testsTasks: true,
  },
  {
    name: 'node-test',
    runner: 'node:test',
    ext: 'js',
    todoStatus: 'todo',
    hookGuardedStatus: 'failed',
    loadFailureAbortsRun: false,
    testsTasks: true,
  },
  {
    name: 'jest-ts',
    runner: 'jest',
    ext: 'ts',
    todoStatus: 'todo',
    hookGuardedStatus: 'failed',
    loadFailureAbortsRun: false,
    testsTasks: true,
  },
  {
    name: 'mocha-tsx',
    runner: 'mocha',
    ext: 'ts',
    todoStatus: 'skipped',
    hookGuardedStatus: 'failed',
    loadFailureAbortsRun: true,
    testsTasks: false,
  },
  {
    name: 'mocha-cjs',
    runner: 'mocha',
    ext: 'js',
    todoStatus: 'skipped',
    hookGuardedStatus: 'failed',
    loadFailureAbortsRun: true,
    testsTasks: false,
  },
];

/** One checked scorer for every fixture (its self-test runs once). */
let scorer: Promise<Scorer> | null = null;
function sharedScorer(): Promise<Scorer> {
  scorer ??= createCheckedScorer({ workspaceId: async (d) => (await workspaceIdentity(d)).id });
  return scorer;
}
afterAll(async () => (await scorer)?.close());

for (const spec of FIXTURES) {
  judgeCompliance(spec.name, {
    async setup(): Promise<JudgeFixture> {
      await prepareFixtures();
      const workspace = join(JUDGE_FIXTURES, spec.name);
      if (spec.runner !== 'node:test' && !existsSync(join(workspace, 'node_modules')))
        throw new Error(`${workspace} has no node_modules: run \`npm ci\` in it (see .ci/run)`);
      return {
        runner: spec.runner,
        workspace,
        scorer: await sharedScorer(),
        files: {
          source: `src/calc.${spec.ext}`,
          scenarios: `test/scenarios.test.${spec.ext}`,
          loadFails: `test/load-fails.test.${spec.ext}`,
          sourceTest: `test/calc.test.${spec.ext}`,
        },
        todoStatus: spec.todoStatus,
        hookGuardedStatus: spec.hookGuardedStatus,
        loadFailureAbortsRun: spec.loadFailureAbortsRun,
        testsTasks: spec.testsTasks,
      };
    },
    async teardown() {},
  });
}
