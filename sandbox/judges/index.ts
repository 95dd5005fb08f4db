import type { TestRunner } from '../../protocol/task.ts';
import type { Judge } from './judge.ts';
import { createNodeTestJudge } from './node-test.ts';
import { createVitestJudge } from './vitest.ts';

/** The judge (runner adapter) for a task's runner. */
export function judgeFor(runner: TestRunner): Judge {
  switch (runner) {
    case 'vitest':
      return createVitestJudge();
    case 'node:test':
      return createNodeTestJudge();
    case 'jest':
    case 'mocha':
      throw new Error(`the ${runner} judge is not available in this version of vtnode`);
  }
}
