/** How much of what the tests reach the miner turned into tasks (pure). */
import type { Task } from '../../protocol/task.ts';
import type { Reach } from './reach.ts';

/** The parts of a task the coverage needs. */
export type MinedTask = Pick<Task, 'kind' | 'target'> & { judge: Pick<Task['judge'], 'testFiles'> };

export interface Coverage {
  /** Sources some test reaches. */
  reachedSources: number;
  /** Tests that reach some source. */
  reachingTests: number;
  /** (source, test) pairs where the test reaches the source. */
  pairs: number;
  /** `file` tasks whose target some test reaches. */
  fileTasksOnReached: number;
  /** `tests` tasks whose target reaches some source. */
  testsTasksOnReaching: number;
  /** Pairs (s, t) where the `file` task of s runs t in its judge. */
  pairsJudged: number;
  /** Task targets the bench does not count (a `file` target no test reaches, a `tests` target reaching nothing). */
  minedOutside: string[];
}

/** Compares the miner's tasks with the sources and tests the bench found reaching each other. */
export function coverageOf(reach: Reach, tasks: readonly MinedTask[]): Coverage {
  const reaching = new Set([...reach.sourcesOf].filter(([, s]) => s.size > 0).map(([t]) => t));
  let fileTasksOnReached = 0;
  let testsTasksOnReaching = 0;
  let pairsJudged = 0;
  const minedOutside: string[] = [];
  for (const task of tasks) {
    if (task.kind === 'file') {
      const testers = reach.testsOf.get(task.target);
      if (!testers) {
        minedOutside.push(`file:${task.target}`);
        continue;
      }
      fileTasksOnReached++;
      pairsJudged += task.judge.testFiles.filter((t) => testers.has(t)).length;
    } else if (reaching.has(task.target)) testsTasksOnReaching++;
    else minedOutside.push(`tests:${task.target}`);
  }
  return {
    reachedSources: reach.testsOf.size,
    reachingTests: reaching.size,
    pairs: reach.pairs,
    fileTasksOnReached,
    testsTasksOnReaching,
    pairsJudged,
    minedOutside: minedOutside.sort(),
  };
}

/** `part` as a percentage of `whole` with one decimal, or null when there is nothing to measure. */
export function percent(part: number, whole: number): number | null {
  return whole === 0 ? null : Math.round((part / whole) * 1000) / 10;
}
