import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drawValid, exportDataset, validGroups } from '../../node/collector/export.ts';
import { passAtK } from '../../node/collector/passk.ts';
import { buildReport } from '../../node/collector/report.ts';
import { type DatasetStore, openDatasetStore } from '../../node/collector/store.ts';
import { fingerprint } from '../../protocol/canonical.ts';
import type { SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
import { vtnode } from '../helpers/cli.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody, sampleTask } from '../helpers/samples.ts';
import { tempDir } from './helpers.ts';

/** Exact pass@k with big integers: 1 − C(n−c, k)/C(n, k). */
function exactPassAtK(n: number, c: number, k: number): number {
  const C = (a: number, b: number): bigint => {
    if (b < 0 || b > a) return 0n;
    let r = 1n;
    for (let i = 1; i <= b; i++) r = (r * BigInt(a - b + i)) / BigInt(i);
    return r;
  };
  const num = C(n - c, k);
  const den = C(n, k);
  // 15 significant digits of the ratio.
  return 1 - Number((num * 10n ** 15n) / den) / 1e15;
}

describe('pass@k (Chen et al. 2021)', () => {
  it('matches the exact combinatorial value', () => {
    for (const [n, c, k] of [
      [10, 0, 1],
      [10, 3, 1],
      [10, 3, 5],
      [10, 10, 10],
      [20, 1, 10],
      [200, 50, 100],
      [200, 1, 1],
      [1000, 7, 100],
    ] as const)
      expect(passAtK(n, c, k)).toBeCloseTo(exactPassAtK(n, c, k), 12);
  });
  it('is c/n for k = 1, 0 with no pass, 1 when fewer than k fail', () => {
    expect(passAtK(8, 3, 1)).toBeCloseTo(3 / 8, 15);
    expect(passAtK(8, 0, 4)).toBe(0);
    expect(passAtK(8, 5, 4)).toBe(1);
  });
  it('stays finite where the binomials overflow a double', () => {
    const v = passAtK(5000, 10, 1000);
    expect(Number.isFinite(v)).toBe(true);
    expect(v).toBeGreaterThan(0.89);
    expect(v).toBeLessThan(1);
  });
  it('refuses impossible arguments', () => {
    expect(() => passAtK(5, 6, 1)).toThrow(RangeError);
    expect(() => passAtK(5, 1, 6)).toThrow(/at least k samples/);
    expect(() => passAtK(5, 1, 0)).toThrow(RangeError);
    expect(() => passAtK(5.5, 1, 1)).toThrow(RangeError);
  });
});

describe('valid groups', () => {
  it('draws whole groups deterministically, at least one, never all', () => {
    const groups = Array.from({ length: 50 }, (_, i) => `g${i}`);
    const a = validGroups(groups, 0.1);
    expect(validGroups([...groups].reverse(), 0.1)).toEqual(a);
    expect(a.size).toBeGreaterThan(0);
    expect(a.size).toBeLessThan(15);
    expect(validGroups(['only'], 0.5).size).toBe(0);
    expect(validGroups(['a', 'b'], 0.01).size).toBe(1);
    expect(validGroups(['a', 'b'], 1).size).toBe(1);
  });

  // mlx_lm.lora refuses an empty valid.jsonl (and --val-batches 0): small repositories still get one.
  const c = (group: string, taskId: string, id: string) => ({ group, taskId, id });
  it('two groups or more: whole groups, no warning', () => {
    const items = [c('g1', 't1', 's1'), c('g1', 't2', 's2'), c('g2', 't3', 's3')];
    const d = drawValid(items, 0.1);
    expect(d.warning).toBeNull();
    expect(d.copy).toBe(false);
    expect(d.groups.size).toBe(1);
    const validGroupsDrawn = new Set([...d.valid].map((i) => items[i]!.group));
    expect(validGroupsDrawn).toEqual(d.groups);
    // Every pair of a drawn group is in valid, none of the other.
    for (const [i, it] of items.entries()) expect(d.valid.has(i)).toBe(d.groups.has(it.group));
  });

  it('one group: whole tasks, at least one, never all, with a warning', () => {
    const items = [c('g', 't1', 's1'), c('g', 't1', 's2'), c('g', 't2', 's3'), c('g', 't3', 's4')];
    const d = drawValid(items, 0.1);
    const tasks = (set: Set<number>) => new Set([...set].map((i) => items[i]!.taskId));
    expect(tasks(d.valid).size).toBeGreaterThan(0);
    expect(tasks(d.valid).size).toBeLessThan(3);
    for (const [i, it] of items.entries()) expect(d.valid.has(i)).toBe(tasks(d.valid).has(it.taskId));
    expect(d.warning).toMatch(/one source-sharing group only: valid\.jsonl holds 1 of its 3 tasks/);
    expect(d.warning).not.toMatch(/val-batches/);
    expect(drawValid([...items].reverse(), 0.1).valid.size).toBe(d.valid.size);
  });

  it('one task: one of its rows; one row: a copy of it; nothing, or fraction 0: no valid set', () => {
    const one = drawValid([c('g', 't', 's1'), c('g', 't', 's2'), c('g', 't', 's3')], 0.1);
    expect(one.valid.size).toBe(1);
    expect(one.copy).toBe(false);
    expect(one.warning).toMatch(/one task only: valid\.jsonl holds 1 of its 3 rows/);
    const single = drawValid([c('g', 't', 's1')], 0.1);
    expect(single).toMatchObject({ valid: new Set([0]), copy: true });
    expect(single.warning).toMatch(/one row only: valid\.jsonl is a copy of it/);
    expect(drawValid([], 0.1)).toMatchObject({ valid: new Set(), warning: null });
    expect(drawValid([c('g1', 't', 's1'), c('g2', 'u', 's2')], 0)).toMatchObject({
      valid: new Set(),
      warning: null,
    });
  });
});

// ---- a dataset: 6 train tasks in 6 groups, 2 eval tasks; 2 models; k = 4 ----
function task(id: string, group: string, split: 'train' | 'eval'): Task {
  const t = sampleTask(id, `write ${id}`);
  return {
    ...t,
    group,
    split,
    workspace: { ...t.workspace, commit: 'c0ffee' },
    promptFingerprint: fingerprint(t.messages),
  };
}
const TASKS = [
  ...Array.from({ length: 6 }, (_, i) => task(`train-${i}`, `group-${i}`, 'train')),
  task('eval-0', 'eval-group-0', 'eval'),
  task('eval-1', 'eval-group-1', 'eval'),
];
const SIGNERS = await Promise.all([testSigner(), testSigner()]);
const ORIGINS = SIGNERS.map((s) => s.origin);
const signerOf = (origin: string) => SIGNERS.find((s) => s.origin === origin)!;

/** Every (task, model, index) sample: passes when (task + index) is even for qwen, index 0 only for llama. */
function bodies(): { origin: string; body: SampleBody }[] {
  const out: { origin: string; body: SampleBody }[] = [];
  TASKS.forEach((t, ti) => {
    for (const model of ['qwen', 'llama'])
      for (let index = 0; index < 4; index++) {
        const pass = model === 'qwen' ? (ti + index) % 2 === 0 : index === 0;
        // Two passing candidates of train-0 differ only in whitespace: one row after de-duplication.
        const candidate =
          t.id === 'train-0' && model === 'qwen' && pass
            ? `export const add = (a, b) =>${' '.repeat(index + 1)}a + b;\n`
            : `// ${t.id} ${model} ${index}\nexport const add = (a, b) => a ${pass ? '+' : '-'} b;\n`;
        const b = sampleBody(t.id, model, index, { candidate, reward: pass ? 1 : 0.5, split: t.split });
        b.score.diagnostics = pass ? '' : 'AssertionError: expected 5, got -1';
        out.push({ origin: ORIGINS[(ti + index) % 2]!, body: b });
      }
  });
  return out;
}

function fill(store: DatasetStore, order: 'forward' | 'reverse'): void {
  const all = bodies();
  const seqs = new Map<string, number>();
  const entries = all.map(({ origin, body }) => {
    const seq = (seqs.get(origin) ?? 0) + 1;
    seqs.set(origin, seq);
    return { d: signedDigest(signerOf(origin), seq, body), body };
  });
  if (order === 'reverse') entries.reverse();
  for (const { d } of entries) store.addDigest(d);
  for (const { d, body } of entries) store.putBody(d, body);
  store.putTasks(order === 'reverse' ? [...TASKS].reverse() : TASKS);
  store.setMeta('minReward', '1');
}

let tmp: Awaited<ReturnType<typeof tempDir>>;
let dsA: string;
let dsB: string;

async function files(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out[relative(dir, p)] = await readFile(p, 'utf8');
    }
  };
  await walk(dir);
  return out;
}

beforeAll(async () => {
  tmp = await tempDir('vtnode-export-test-');
  dsA = join(tmp.dir, 'a');
  dsB = join(tmp.dir, 'b');
  const a = openDatasetStore(dsA);
  fill(a, 'forward');
  a.close();
  const b = openDatasetStore(dsB);
  fill(b, 'reverse');
  b.close();
});
afterAll(async () => {
  await tmp.cleanup();
});

describe('vtnode export', () => {
  it('is byte-identical across runs and across datasets filled in another order', async () => {
    for (const format of ['mlx', 'hf', 'repair']) {
      const outs = [join(tmp.dir, `${format}-1`), join(tmp.dir, `${format}-2`), join(tmp.dir, `${format}-3`)];
      for (const [i, out] of outs.entries()) {
        const r = await vtnode(['export', '--from', i === 2 ? dsB : dsA, '--format', format, '--out', out]);
        expect(r.code, r.stderr).toBe(0);
      }
      const [f1, f2, f3] = await Promise.all(outs.map(files));
      expect(Object.keys(f1!).length).toBeGreaterThan(2);
      expect(f2).toEqual(f1);
      expect(f3).toEqual(f1);
    }
  }, 60_000);

  it('mlx: chat messages, train split only, valid drawn by group, the manifest hashes every file', async () => {
    const out = join(tmp.dir, 'mlx-1');
    const f = await files(out);
    const parse = (text: string) =>
      text
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { messages: { role: string; content: string }[] });
    const train = parse(f['train.jsonl']!);
    const valid = parse(f['valid.jsonl']!);
    const all = [...train, ...valid];
    const taskOf = (row: { messages: { content: string }[] }) =>
      row.messages[0]!.content.replace('write ', '');
    expect(all.every((r) => !taskOf(r).startsWith('eval'))).toBe(true);
    expect(valid.length).toBeGreaterThan(0);
    const trainTasks = new Set(train.map(taskOf));
    for (const r of valid) expect(trainTasks.has(taskOf(r))).toBe(false);
    for (const r of all) {
      expect(r.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
      expect(r.messages[1]!.content).toMatch(/^```ts\n[\s\S]*\n```$/);
    }
    // train-0: two whitespace variants of one passing candidate are one row.
    expect(all.filter((r) => taskOf(r) === 'train-0' && r.messages[1]!.content.includes('=>'))).toHaveLength(
      2,
    );
    const manifest = JSON.parse(f['manifest.json']!);
    expect(manifest.counts.excluded.duplicate).toBeGreaterThan(0);
    expect(manifest.files.map((x: { path: string }) => x.path)).toEqual(['train.jsonl', 'valid.jsonl']);
    const { sha256Hex } = await import('../../protocol/canonical.ts');
    for (const file of manifest.files) expect(file.sha256).toBe(sha256Hex(f[file.path]!));
    expect(manifest).toMatchObject({ format: 'mlx', models: ['llama', 'qwen'], commits: ['c0ffee'] });
    expect(manifest.counts.rows).toBe(all.length);
  });

  it('hf: train and test splits, and a dataset card with YAML front matter', async () => {
    const f = await files(join(tmp.dir, 'hf-1'));
    const card = f['README.md']!;
    expect(card.startsWith('---\n')).toBe(true);
    const front = card.split('---\n')[1]!;
    expect(front).toMatch(/license: other/);
    expect(front).toMatch(/- split: train\n {4}path: data\/train.jsonl/);
    expect(front).toMatch(/- split: test\n {4}path: data\/test.jsonl/);
    expect(front).toMatch(/- name: completion\n {6}dtype: string/);
    const test = f['data/test.jsonl']!.trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(test.length).toBeGreaterThan(0);
    expect(test.every((r: { task_id: string }) => r.task_id.startsWith('eval'))).toBe(true);
    const train = f['data/train.jsonl']!.trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(
      train.every(
        (r: { task_id: string; reward: number }) => r.task_id.startsWith('train') && r.reward === 1,
      ),
    ).toBe(true);
  });

  it('repair: a failed candidate and its diagnostics as the prompt, a passing sample of the same task as the answer', async () => {
    const f = await files(join(tmp.dir, 'repair-1'));
    const rows = [...f['train.jsonl']!.trim().split('\n'), ...f['valid.jsonl']!.trim().split('\n')]
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { messages: { role: string; content: string }[] });
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      const [user, assistant] = r.messages;
      expect(user!.content).toMatch(/A previous attempt:/);
      expect(user!.content).toMatch(/a - b/);
      expect(user!.content).toMatch(/AssertionError: expected 5, got -1/);
      expect(assistant!.content).toMatch(/a \+ b|=>\s+a \+ b/);
      const task = user!.content.split('\n')[0]!.replace('write ', '');
      expect(task.startsWith('train')).toBe(true);
    }
  });

  it('leaves out quarantined samples and samples of unknown tasks (flagged in the manifest)', async () => {
    const ds = join(tmp.dir, 'c');
    const s = openDatasetStore(ds);
    fill(s, 'forward');
    const extra = sampleBody('unknown-task', 'qwen', 0, { candidate: 'export const x = 1;\n' });
    const d = signedDigest(await testSigner(), 1000, extra);
    s.addDigest(d);
    s.putBody(d, extra);
    s.quarantineOrigin(ORIGINS[0]!);
    s.close();
    const out = join(tmp.dir, 'c-mlx');
    const r = await vtnode(['export', '--from', ds, '--format', 'mlx', '--out', out, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(r.stdout);
    expect(manifest.counts.missingTasks).toBe(1);
    expect(manifest.counts.excluded['no-task']).toBe(1);
    expect(manifest.counts.excluded.quarantined).toBeGreaterThan(0);
    expect(manifest.warnings.join()).toMatch(/no task in the dataset/);
    const text =
      (await readFile(join(out, 'train.jsonl'), 'utf8')) + (await readFile(join(out, 'valid.jsonl'), 'utf8'));
    expect(text).not.toMatch(/export const x = 1/);
  }, 30_000);

  it('refuses a missing dataset and an unknown format', async () => {
    const r1 = await vtnode([
      'export',
      '--from',
      join(tmp.dir, 'nope'),
      '--format',
      'mlx',
      '--out',
      join(tmp.dir, 'x'),
    ]);
    expect(r1.code).toBe(1);
    expect(r1.stderr).toMatch(/not a dataset/);
    const r2 = await vtnode(['export', '--from', dsA, '--format', 'parquet', '--out', join(tmp.dir, 'x')]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/--format must be one of mlx, hf, repair/);
  }, 30_000);
});

describe('a small repository (one source-sharing group)', () => {
  it('mlx and repair write a valid.jsonl mlx_lm.lora accepts: not empty, and no --val-batches 0 advice', async () => {
    const ds = join(tmp.dir, 'one-group');
    const s = openDatasetStore(ds);
    const tasks = [task('t-0', 'only', 'train'), task('t-1', 'only', 'train'), task('t-2', 'only', 'train')];
    const signer = await testSigner();
    let seq = 0;
    for (const t of tasks)
      for (let index = 0; index < 2; index++) {
        const pass = index === 0;
        const b = sampleBody(t.id, 'qwen', index, {
          candidate: `// ${t.id} ${index}\nexport const add = (a, b) => a ${pass ? '+' : '-'} b;\n`,
          reward: pass ? 1 : 0.5,
        });
        const d = signedDigest(signer, ++seq, b);
        s.addDigest(d);
        s.putBody(d, b);
      }
    s.putTasks(tasks);
    s.setMeta('minReward', '1');
    try {
      for (const format of ['mlx', 'repair'] as const) {
        const out = join(tmp.dir, `one-group-${format}`);
        const manifest = await exportDataset({ store: s, format, out });
        const f = await files(out);
        const rows = (name: string) => f[name]!.split('\n').filter(Boolean).length;
        expect({ format, train: rows('train.jsonl') > 0, valid: rows('valid.jsonl') > 0 }).toEqual({
          format,
          train: true,
          valid: true,
        });
        expect(rows('train.jsonl') + rows('valid.jsonl')).toBe(3);
        expect(manifest.warnings.join('\n')).toMatch(
          /one source-sharing group only: valid\.jsonl holds 1 of its 3 tasks/,
        );
        expect(manifest.warnings.join('\n')).not.toMatch(/val-batches/);
      }
    } finally {
      s.close();
    }
  });
});

describe('vtnode report', () => {
  it('prints pass@1 and pass@k per model as JSON', async () => {
    const r = await vtnode(['report', '--from', dsA, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    const byModel = Object.fromEntries(report.models.map((m: { model: string }) => [m.model, m]));
    // qwen: every task has 2 of 4 passing; llama: 1 of 4.
    expect(byModel.qwen).toMatchObject({
      tasks: 8,
      samples: 32,
      k: 4,
      pass1: 0.5,
      passk: 1,
      meanReward: 0.75,
    });
    expect(byModel.llama).toMatchObject({ tasks: 8, samples: 32, k: 4, pass1: 0.25, passk: 1 });
    expect(byModel.llama.meanReward).toBeCloseTo(0.625, 6);
    expect(byModel.qwen).toMatchObject({ truncationRate: 0, tokensPerSecond: 47.1 });
    // Cache hits as `vtnode run` counts them (3 of every 4 prompts warm); cached tokens apart.
    expect(byModel.qwen.cacheHitRate).toBe(0.75);
    expect(byModel.qwen.cachedTokenRate).toBeCloseTo((3 * 1184) / (4 * 1200), 5);
  }, 30_000);

  it('filters by split and takes k', async () => {
    const r = await vtnode(['report', '--from', dsA, '--split', 'eval', '--k', '2', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.split).toBe('eval');
    const llama = report.models.find((m: { model: string }) => m.model === 'llama');
    expect(llama).toMatchObject({ tasks: 2, samples: 8, k: 2, passk: 0.5 });
    const human = await vtnode(['report', '--from', dsA]);
    expect(human.stdout).toMatch(/pass@1/);
    expect(human.stdout).toMatch(/qwen\s+8\s+32\s+50\.0%/);
  }, 30_000);

  it("cache hits agree with `vtnode run`'s for the same samples, also from servers that report no cached tokens", async () => {
    const s = openDatasetStore(join(tmp.dir, 'uncached'));
    const signer = await testSigner();
    // A server that reports no cached token count (the emulator, llama-server): `run` still counts
    // warm prompts, and so must the report (it printed "-").
    const warm = [false, true, true, false, true];
    for (const [i, w] of warm.entries()) {
      const b = sampleBody('t', 'qwen', i);
      const body = {
        ...b,
        generation: { ...b.generation, warm: w, usage: { ...b.generation.usage, cached: null } },
      };
      const d = signedDigest(signer, i + 1, body);
      s.addDigest(d);
      s.putBody(d, body);
    }
    const m = buildReport(s.samples()).models[0]!;
    // run's figure: the mean of the samples' warm flags (node/submitter/campaign-summary.ts, AVG(warm)).
    const runs = warm.filter(Boolean).length / warm.length;
    expect({ cacheHitRate: m.cacheHitRate, cachedTokenRate: m.cachedTokenRate }).toEqual({
      cacheHitRate: runs,
      cachedTokenRate: null,
    });
    s.close();
  });

  it('counts a sample whose audit failed with its audited reward', async () => {
    const s = openDatasetStore(join(tmp.dir, 'audited'));
    const b = sampleBody('t', 'qwen', 0);
    const d = signedDigest(await testSigner(), 1, b);
    s.addDigest(d);
    s.putBody(d, b);
    expect(buildReport(s.samples()).models[0]).toMatchObject({ pass1: 1, auditFailures: 0 });
    s.recordAudit(d, false, 0);
    expect(buildReport(s.samples()).models[0]).toMatchObject({ pass1: 0, meanReward: 0, auditFailures: 1 });
    s.close();
  });
});
