import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../node/sqlite.ts';
import { CampaignName, type CampaignSpec } from '../../node/submitter/campaign-schema.ts';
import { CampaignMismatchError, openCampaignStore } from '../../node/submitter/campaign-store.ts';
import { fingerprint } from '../../protocol/canonical.ts';
import { type SampleResult, sampleId, sampleSeed } from '../../protocol/job.ts';
import { contentHash } from '../../protocol/sample.ts';
import { WRITER_SPEC, WRITER_TASKS } from '../helpers/campaign-writer.ts';
import { REPO } from '../helpers/cli.ts';
import { EVAL_FP } from '../helpers/samples.ts';

const A = '12D3KooWnodeA';
const B = '12D3KooWnodeB';
const prompt = (text: string) => fingerprint([{ role: 'user', content: text }]);
const tasks = [
  { id: 't1', promptFingerprint: prompt('one'), split: 'train' as const },
  { id: 't2', promptFingerprint: prompt('two'), split: 'train' as const },
  { id: 't3', promptFingerprint: prompt('three'), split: 'eval' as const },
];
const spec: CampaignSpec = {
  name: 'c1',
  tasksHash: fingerprint('tasks file'),
  models: ['qwen'],
  k: 4,
  sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase: 7 },
  split: 'all',
};

function result(
  taskId: string,
  model: string,
  index: number,
  opts: { reward?: number; warm?: boolean; scoredAt?: number } = {},
): SampleResult {
  const seed = sampleSeed(spec.sampling.seedBase, index);
  return {
    type: 'sample',
    jobId: `${taskId}#${model}#1`,
    sampleId: sampleId(taskId, model, index, seed),
    index,
    seed,
    reward: opts.reward ?? 1,
    passed: 3,
    failed: 0,
    reasons: [],
    truncated: false,
    usage: { prompt: 1000, completion: 100, cached: opts.warm === false ? 0 : 990 },
    warm: opts.warm ?? true,
    latencyMs: 2000,
    tokensPerSecond: 50,
    contentHash: contentHash(`c${index}`),
    evalFingerprint: EVAL_FP,
    seq: index + 1,
    ...(opts.scoredAt === undefined ? {} : { scoredAt: opts.scoredAt }),
  };
}

let dir: string;
let path: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-campaign-'));
  path = join(dir, 'campaigns.db');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('campaign store', () => {
  it('plans tasks × models × k, records placements and results, and summarises', () => {
    const store = openCampaignStore({ path });
    const { campaign, report } = store.start({ spec: { ...spec, models: ['qwen', 'llama'] }, tasks, now: 1 });
    expect(report).toMatchObject({
      created: true,
      planned: 24,
      reused: 0,
      changed: [],
      dropped: 0,
      skipped: 0,
    });
    expect(campaign.pending().map((p) => [p.taskId, p.model, p.samples])).toEqual([
      ['t1', 'qwen', [0, 1, 2, 3]],
      ['t1', 'llama', [0, 1, 2, 3]],
      ['t2', 'qwen', [0, 1, 2, 3]],
      ['t2', 'llama', [0, 1, 2, 3]],
      ['t3', 'qwen', [0, 1, 2, 3]],
      ['t3', 'llama', [0, 1, 2, 3]],
    ]);
    campaign.placed(
      { jobId: 't1#qwen#1', taskId: 't1', model: 'qwen', peerId: A, samples: [0, 1, 2, 3], attempt: 1 },
      2,
    );
    campaign.generated(
      't1',
      'qwen',
      A,
      {
        type: 'generated',
        jobId: 't1#qwen#1',
        index: 0,
        usage: { prompt: 1000, completion: 80, cached: 0 },
        warm: false,
        latencyMs: 9000,
        tokensPerSecond: 10,
      },
      3,
    );
    expect(campaign.summary().samples).toEqual({
      planned: 24,
      placed: 3,
      generated: 1,
      scored: 0,
      verified: 0,
    });
    expect(campaign.result('t1', 'qwen', A, result('t1', 'qwen', 0, { warm: false }), 4)).toBe('accepted');
    expect(campaign.result('t1', 'qwen', A, result('t1', 'qwen', 1, { reward: 0.5 }), 5)).toBe('accepted');
    expect(campaign.result('t1', 'qwen', A, result('t1', 'qwen', 2), 6)).toBe('accepted');
    campaign.placed(
      { jobId: 't2#llama#1', taskId: 't2', model: 'llama', peerId: B, samples: [0, 1, 2, 3], attempt: 1 },
      7,
    );
    expect(campaign.result('t2', 'llama', B, result('t2', 'llama', 3), 8)).toBe('accepted');

    const s = campaign.summary();
    expect(s.samples).toEqual({ planned: 24, placed: 4, generated: 4, scored: 4, verified: 3 });
    expect(s.cacheHitRate).toBe(0.75);
    expect(s.completionTokens).toBe(400);
    expect(s.tasks).toEqual([
      { taskId: 't1', nodes: [A], planned: 8, samples: 3, verified: 2 },
      { taskId: 't2', nodes: [B], planned: 8, samples: 1, verified: 1 },
      { taskId: 't3', nodes: [], planned: 8, samples: 0, verified: 0 },
    ]);
    expect(s.nodes.map((n) => [n.peerId, n.generated, n.scored, n.verified, n.cacheHitRate])).toEqual([
      [A, 3, 3, 2, 2 / 3],
      [B, 1, 1, 1, 1],
    ]);
    expect(s.models.map((m) => [m.model, m.planned, m.scored, m.verified, m.tokensPerSecond])).toEqual([
      ['llama', 12, 1, 1, 50],
      ['qwen', 12, 3, 2, 50],
    ]);
    // A lease that ends hands its unfinished samples back.
    expect(campaign.released('t1#qwen#1', 9)).toBe(1);
    expect(campaign.pending()[0]).toMatchObject({ taskId: 't1', model: 'qwen', samples: [3], attempts: 1 });
    store.close();
  });

  it('is idempotent on duplicate results and rejects results that are not the slot they claim', () => {
    const store = openCampaignStore({ path });
    const { campaign } = store.start({ spec, tasks, now: 1 });
    expect(campaign.result('t1', 'qwen', A, result('t1', 'qwen', 1), 2)).toBe('accepted');
    expect(campaign.result('t1', 'qwen', B, result('t1', 'qwen', 1, { reward: 0 }), 3)).toBe('duplicate');
    expect(campaign.summary().samples).toMatchObject({ scored: 1, verified: 1 });
    expect(campaign.summary().tasks[0]!.nodes).toEqual([A]);

    const wrongSeed = { ...result('t1', 'qwen', 2), seed: 99 };
    expect(() => campaign.result('t1', 'qwen', A, wrongSeed, 4)).toThrow(/generated with seed 99, not 9/);
    const otherTask = result('t2', 'qwen', 2);
    expect(() => campaign.result('t1', 'qwen', A, otherTask, 4)).toThrow(
      /sampleId: sample id .* is not that of t1 qwen #2/,
    );
    expect(() => campaign.result('t1', 'qwen', A, { ...result('t1', 'qwen', 2), index: 9 }, 4)).toThrow(
      /index 9 is not below k = 4/,
    );
    expect(() =>
      campaign.result('t1', 'qwen', A, { ...result('t1', 'qwen', 2), reward: 2 } as never, 4),
    ).toThrow(/result from 12D3KooWnodeA: reward/);
    expect(() => campaign.result('t9', 'qwen', A, result('t9', 'qwen', 0), 4)).toThrow(
      /no sample 0 of task t9/,
    );
    expect(campaign.summary().samples.scored).toBe(1);
    store.close();
  });

  it('counts the samples a worker had scored before the campaign began (a run again with the same seed)', () => {
    const store = openCampaignStore({ path });
    const { campaign } = store.start({ spec, tasks, now: 1000 });
    campaign.result('t1', 'qwen', A, result('t1', 'qwen', 0, { scoredAt: 400 }), 1001);
    campaign.result('t1', 'qwen', A, result('t1', 'qwen', 1, { scoredAt: 999 }), 1002);
    campaign.result('t1', 'qwen', A, result('t1', 'qwen', 2, { scoredAt: 1000 }), 1003);
    campaign.result('t1', 'qwen', A, result('t1', 'qwen', 3, { scoredAt: 5000 }), 1004);
    // A worker that does not say when it scored: not counted as earlier.
    campaign.result('t2', 'qwen', A, result('t2', 'qwen', 0), 1005);
    expect(campaign.summary()).toMatchObject({ preexisting: 2, samples: { scored: 5 } });
    // A resume keeps the campaign's creation time: what this campaign scored stays its own.
    const again = store.start({ spec, tasks, now: 9000 }).campaign;
    expect(again.summary().preexisting).toBe(2);
    store.close();
  });

  it('resumes after close and reopen without redoing finished samples', () => {
    let store = openCampaignStore({ path });
    let { campaign } = store.start({ spec, tasks, now: 1 });
    campaign.placed(
      { jobId: 't1#qwen#1', taskId: 't1', model: 'qwen', peerId: A, samples: [0, 1, 2, 3], attempt: 1 },
      2,
    );
    for (const i of [0, 2]) campaign.result('t1', 'qwen', A, result('t1', 'qwen', i), 3);
    campaign.placed(
      { jobId: 't2#qwen#2', taskId: 't2', model: 'qwen', peerId: B, samples: [0, 1, 2, 3], attempt: 2 },
      2,
    );
    store.close();

    store = openCampaignStore({ path });
    expect(store.list()).toEqual([{ name: 'c1', status: 'running', createdAt: 1, updatedAt: 3 }]);
    const resumed = store.start({ spec, tasks, now: 10 });
    campaign = resumed.campaign;
    expect(resumed.report).toMatchObject({
      created: false,
      planned: 12,
      reused: 2,
      requeued: 6,
      dropped: 0,
      changed: [],
    });
    expect(campaign.pending()).toEqual([
      { taskId: 't1', model: 'qwen', promptFingerprint: prompt('one'), samples: [1, 3], attempts: 1 },
      { taskId: 't2', model: 'qwen', promptFingerprint: prompt('two'), samples: [0, 1, 2, 3], attempts: 2 },
      { taskId: 't3', model: 'qwen', promptFingerprint: prompt('three'), samples: [0, 1, 2, 3], attempts: 0 },
    ]);
    expect(campaign.summary().samples).toEqual({
      planned: 12,
      placed: 0,
      generated: 2,
      scored: 2,
      verified: 2,
    });
    campaign.finish('done', 11);
    expect(store.get('c1')?.status()).toBe('done');
    expect(store.get('nope')).toBeUndefined();
    store.close();
  });

  it('does not reuse samples of a task whose prompt changed, nor of a model or task dropped from the plan', () => {
    let store = openCampaignStore({ path });
    const { campaign } = store.start({ spec: { ...spec, models: ['qwen', 'llama'] }, tasks, now: 1 });
    for (const t of ['t1', 't2', 't3'])
      for (const m of ['qwen', 'llama']) campaign.result(t, m, A, result(t, m, 0), 2);
    store.close();

    store = openCampaignStore({ path });
    const edited = [{ ...tasks[0]!, promptFingerprint: prompt('one, reworded') }, tasks[1]!];
    const { campaign: again, report } = store.start({
      spec: { ...spec, models: ['qwen'] },
      tasks: edited,
      now: 5,
    });
    expect(report.changed).toEqual([{ taskId: 't1', model: 'qwen' }]);
    expect(report.reused).toBe(1); // t2 qwen #0
    expect(report.removed).toBe(4); // t1, t2, t3 with llama and t3 with qwen left the plan
    expect(again.pending().map((p) => [p.taskId, p.promptFingerprint, p.samples])).toEqual([
      ['t1', prompt('one, reworded'), [0, 1, 2, 3]],
      ['t2', prompt('two'), [1, 2, 3]],
    ]);
    expect(again.summary().samples).toMatchObject({ planned: 8, scored: 1 });
    store.close();
  });

  it('refuses a resume with other k, sampling or split, and applies the split filter', () => {
    const store = openCampaignStore({ path });
    const { report } = store.start({ spec: { ...spec, split: 'train' }, tasks, now: 1 });
    expect(report).toMatchObject({ planned: 8, skipped: 1 });
    expect(() => store.start({ spec: { ...spec, split: 'train', k: 8 }, tasks, now: 2 })).toThrow(
      CampaignMismatchError,
    );
    expect(() =>
      store.start({
        spec: { ...spec, split: 'train', sampling: { ...spec.sampling, temperature: 0.2 } },
        tasks,
        now: 2,
      }),
    ).toThrow(/samples with .*"temperature":0.8.*not .*"temperature":0.2/);
    expect(() => store.start({ spec, tasks, now: 2 })).toThrow(/runs split train, not all/);
    expect(() => store.start({ spec: { ...spec, name: 'bad name' }, tasks, now: 2 })).toThrow(
      /name: a campaign name/,
    );
    expect(() =>
      store.start({ spec: { ...spec, name: 'dup' }, tasks: [tasks[0]!, tasks[0]!], now: 2 }),
    ).toThrow(/task t1 appears twice/);
    expect(store.list().map((c) => c.name)).toEqual(['c1']);
    expect(CampaignName.safeParse('../x').success).toBe(false);
    store.close();
  });

  it('drops bad stored results on resume and redoes those samples', () => {
    let store = openCampaignStore({ path });
    const { campaign } = store.start({ spec, tasks, now: 1 });
    for (const i of [0, 1, 2, 3]) campaign.result('t1', 'qwen', A, result('t1', 'qwen', i), 2);
    store.close();

    // Damage rows behind the store's back: a torn JSON record, a result of another slot, a scored row without result.
    const db = openDatabase(path);
    db.prepare("UPDATE slots SET result = substr(result, 1, 40) WHERE task_id = 't1' AND idx = 1").run();
    db.prepare(
      "UPDATE slots SET result = (SELECT result FROM slots WHERE task_id = 't1' AND idx = 0) WHERE task_id = 't1' AND idx = 2",
    ).run();
    db.prepare("UPDATE slots SET result = NULL WHERE task_id = 't1' AND idx = 3").run();
    db.close();

    store = openCampaignStore({ path });
    const { campaign: again, report } = store.start({ spec, tasks, now: 3 });
    expect(report).toMatchObject({ reused: 1, dropped: 3 });
    expect(again.pending()[0]).toMatchObject({ taskId: 't1', samples: [1, 2, 3] });
    expect(again.summary().samples).toMatchObject({ scored: 1, verified: 1 });
    store.close();
  });

  it('a submitter killed with SIGKILL mid-campaign resumes with every acknowledged result', async () => {
    const child = spawn(process.execPath, [join(REPO, 'test/helpers/campaign-writer.ts'), path], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('exit', (_c, signal) => resolve(signal)),
    );
    const acked: [string, number][] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`writer too slow: ${acked.length} acks\n${stderr}`)),
        20_000,
      );
      let buf = '';
      child.stdout.on('data', (d) => {
        buf += d;
        const lines = buf.split('\n');
        buf = lines.pop()!;
        for (const line of lines) {
          const [, taskId, index] = line.split(' ');
          acked.push([taskId!, Number(index)]);
        }
        if (acked.length >= 100) {
          clearTimeout(timer);
          child.kill('SIGKILL');
          resolve();
        }
      });
    });
    expect(await exited).toBe('SIGKILL');

    const store = openCampaignStore({ path });
    const { campaign, report } = store.start({ spec: WRITER_SPEC, tasks: WRITER_TASKS, now: 10 });
    expect(report.created).toBe(false);
    expect(report.dropped).toBe(0);
    expect(report.reused).toBeGreaterThanOrEqual(acked.length);
    expect(report.reused).toBeLessThan(1600);
    const pending = new Map(campaign.pending().map((p) => [p.taskId, p.samples]));
    for (const [taskId, index] of acked) expect(pending.get(taskId) ?? []).not.toContain(index);
    const s = campaign.summary().samples;
    expect(s.scored).toBe(report.reused);
    expect(s.placed).toBe(0); // the dead run's placements were requeued
    expect(s.planned - s.scored).toBe([...pending.values()].reduce((n, p) => n + p.length, 0));
    store.close();
  });
});
