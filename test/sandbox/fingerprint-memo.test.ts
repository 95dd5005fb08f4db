import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScorer } from '../../sandbox/scorer.ts';
import { createUnconfined } from '../../sandbox/unconfined.ts';
import { sampleTask } from '../helpers/samples.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-fpmemo-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A task judged by node:test (its version never fails to read) with `timeoutMs`. */
function nodeTestTask(timeoutMs: number) {
  const task = sampleTask('t1');
  return { ...task, judge: { ...task.judge, runner: 'node:test' as const, timeoutMs } };
}

describe('evaluation fingerprint', () => {
  it('is read once per workspace dir and judge, not for every sample', async () => {
    let ids = 0;
    const scorer = createScorer({
      confinement: createUnconfined(),
      workspaceId: async () => `ws-${++ids}`,
    });
    const task = nodeTestTask(8000);
    const first = scorer.fingerprint(task, dir);
    expect(scorer.fingerprint(task, dir)).toBe(first);
    expect(scorer.fingerprint({ ...task, id: 'another task, same judge' }, dir)).toBe(first);
    // Another judge (its limits differ) has its own fingerprint.
    const other = scorer.fingerprint(nodeTestTask(9000), dir);
    expect(other).not.toBe(first);
    expect(await other).not.toBe(await first);
  });

  it('is not kept when the runner version could not be read', async () => {
    const scorer = createScorer({ confinement: createUnconfined(), workspaceId: async () => 'ws' });
    // No vitest anywhere in an empty dir: the version is unknown and looked for again next time.
    const task = sampleTask('t1');
    const first = scorer.fingerprint(task, dir);
    await first;
    expect(scorer.fingerprint(task, dir)).not.toBe(first);
  });
});
