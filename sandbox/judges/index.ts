import type { TestRunner } from '../../protocol/task.ts';
import { createJestJudge } from './jest.ts';
import type { Judge } from './judge.ts';
import { createMochaJudge } from './mocha.ts';
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
      return createJestJudge();
    case 'mocha':
      return createMochaJudge();
  }
}
