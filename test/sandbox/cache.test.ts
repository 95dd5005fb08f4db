import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceIdentity } from '../../node/workspace/content-id.ts';
import { createBwrapConfinement } from '../../sandbox/bwrap.ts';
import { createScoringCache, referenceKey, type StoredReference } from '../../sandbox/cache.ts';
import type { Confinement } from '../../sandbox/confinement.ts';
import { createScorer } from '../../sandbox/scorer.ts';
import { fixtureTasks, NODE_WS, prepareFixtures } from './fixtures.ts';

let dir: string;
beforeAll(async () => {
  await prepareFixtures();
  dir = await mkdtemp(join(tmpdir(), 'vtnode-cache-test-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const stored: StoredReference = {
  v: 3,
  contentHash: 'abc',
  verdict: { cases: [{ file: 't.test.js', name: 'a', status: 'passed' }], errors: [] },
  sentinels: [['t.test.js', { ok: false, problem: 'x' }]],
  exitDisagreement: null,
  failure: null,
  time: { wallMs: 1200, cpuMs: 900 },
};

describe('reference cache', () => {
  it('keeps an entry across instances, keyed by fingerprint, task, reference and kind', async () => {
    const a = createScoringCache({ dir: join(dir, 'a') });
    const key = referenceKey('sha256:f', 'task-1', 'sha256:r', 'file');
    expect(await a.references.get(key)).toBeNull();
    await a.references.put(key, stored);
    expect(await createScoringCache({ dir: join(dir, 'a') }).references.get(key)).toEqual(stored);
    for (const other of [
      referenceKey('sha256:g', 'task-1', 'sha256:r', 'file'),
      referenceKey('sha256:f', 'task-2', 'sha256:r', 'file'),
      referenceKey('sha256:f', 'task-1', 'sha256:s', 'file'),
      referenceKey('sha256:f', 'task-1', 'sha256:r', 'tests'),
    ])
      expect(other).not.toBe(key);
  });

  it('drops a torn or foreign entry instead of trusting it', async () => {
    const c = createScoringCache({ dir: join(dir, 'b') });
    const key = referenceKey('sha256:f', 't', 'sha256:r', 'file');
    await c.references.put(key, stored);
    const file = join(dir, 'b', 'references', `${key}.json`);
    await writeFile(file, (await readFile(file, 'utf8')).slice(0, 20));
    expect(await c.references.get(key)).toBeNull();
    expect(await readdir(join(dir, 'b', 'references'))).toEqual([]);
    await writeFile(file, JSON.stringify({ ...stored, v: 4 }));
    expect(await c.references.get(key)).toBeNull();
    // An entry of the previous version has no reference time (the hang rule's yardstick): run again.
    const { time: _, ...older } = stored;
    await writeFile(file, JSON.stringify({ ...older, v: 2 }));
    expect(await c.references.get(key)).toBeNull();
  });
});

describe('self-test cache', () => {
  const checks = [{ name: 'network', ok: true, detail: 'refused' }];
  it('reuses a passed self-test of the same backend within its TTL', async () => {
    let t = 1_000_000;
    const c = createScoringCache({ dir: join(dir, 'c'), selfTestTtlMs: 1000, now: () => t });
    await c.selfTest.put({ backend: 'bwrap', version: '0.8.0' }, checks);
    expect(await c.selfTest.get({ backend: 'bwrap', version: '0.8.0' })).toEqual(checks);
    expect(await c.selfTest.get({ backend: 'bwrap', version: '0.9.0' })).toBeNull();
    t += 1001;
    expect(await c.selfTest.get({ backend: 'bwrap', version: '0.8.0' })).toBeNull();
    t -= 5000; // a clock that went back does not extend it either
    expect(await c.selfTest.get({ backend: 'bwrap', version: '0.8.0' })).toBeNull();
  });

  it('never reuses a failed one', async () => {
    const c = createScoringCache({ dir: join(dir, 'd') });
    await c.selfTest.put({ b: 1 }, [{ name: 'network', ok: false, detail: 'succeeded' }]);
    expect(await c.selfTest.get({ b: 1 })).toBeNull();
  });
});

describe('a scorer with a cache', () => {
  it('runs a reference once across scorer instances (processes), and again under another fingerprint', async () => {
    const task = (await fixtureTasks())['math']!;
    const base = await createBwrapConfinement();
    let runs = 0;
    const counting: Confinement = {
      ...base,
      run: (spec) => {
        runs++;
        return base.run(spec);
      },
    };
    const cache = createScoringCache({ dir: join(dir, 'e') });
    const workspaceId = async (d: string) => (await workspaceIdentity(d)).id;
    const reference = await readFile(join(NODE_WS, task.target), 'utf8');
    const wrong = reference.replace('return a + b;', 'return a - b;');
    const first = createScorer({ confinement: counting, workspaceId, cache });
    expect((await first.score({ task, workspaceDir: NODE_WS, candidate: wrong })).reward).toBeCloseTo(
      5 / 6,
      6,
    );
    expect(runs).toBe(2); // the reference, then the candidate
    const second = createScorer({ confinement: counting, workspaceId, cache });
    const again = await second.score({ task, workspaceDir: NODE_WS, candidate: wrong });
    expect(again.reward).toBeCloseTo(5 / 6, 6);
    expect(runs).toBe(3); // the candidate only
    expect((await second.score({ task, workspaceDir: NODE_WS, candidate: reference })).reward).toBe(1);
    expect(runs).toBe(3); // the reference itself comes from the cache
    const other = createScorer({ confinement: counting, workspaceId, cache, lintFactor: 0.8 });
    await other.score({ task, workspaceDir: NODE_WS, candidate: wrong });
    expect(runs).toBe(5); // another fingerprint: reference and candidate again
  }, 120_000);
});
