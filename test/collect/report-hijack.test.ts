import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildReport } from '../../node/collector/report.ts';
import { selectRows } from '../../node/collector/select.ts';
import { openDatasetStore, type StoredSample } from '../../node/collector/store.ts';
import type { SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
import { vtnode } from '../helpers/cli.ts';
import { signedDigest, testSigner } from '../helpers/digests.ts';
import { sampleBody, sampleTask } from '../helpers/samples.ts';
import { tempDir } from './helpers.ts';

// Report and export over stored claims, as a collector's dataset holds them: a member republishing
// other members' sample ids with its own rewards or candidates must not decide what counts, whatever
// its peer id; honest duplicates (a job redone elsewhere) count once.

const SIG = 'A'.repeat(86);
const HONEST = '12D3KooWHonestWorker';
const EARLY = '12D3KooWAAAAhijacker'; // sorts before HONEST
const LATE = '12D3KooWzzzzhijacker'; // sorts after HONEST
const TASK: Task = sampleTask('t');
const TASKS = new Map([[TASK.id, TASK]]);

function stored(
  origin: string,
  seq: number,
  body: SampleBody,
  extra: Partial<StoredSample> = {},
): StoredSample {
  return {
    digest: {
      v: 1,
      sampleId: body.sampleId,
      taskId: body.taskId,
      model: body.model,
      split: body.split,
      reward: body.score.reward,
      contentHash: body.contentHash,
      evalFingerprint: body.score.evalFingerprint,
      origin,
      seq,
      sig: SIG,
    },
    bodyState: 'ok',
    body,
    audit: 'none',
    auditReward: null,
    quarantined: false,
    rescore: null,
    ...extra,
  };
}

/** Honest samples 0..3 of task t: 0 and 1 pass, 2 and 3 fail. */
const honest = [0, 1, 2, 3].map((i) =>
  stored(HONEST, i + 1, sampleBody('t', 'qwen', i, { reward: i < 2 ? 1 : 0, candidate: `honest ${i}\n` })),
);

/** The hijacker's claims for honest sample ids: the rewards flipped (its candidate or the honest one). */
function hijack(origin: string, indices: number[], ownCandidate: boolean): StoredSample[] {
  return indices.map((i, n) => {
    const reward = i < 2 ? 0 : 1;
    const candidate = ownCandidate ? `hijacked ${i}\n` : `honest ${i}\n`;
    return stored(origin, n + 1, sampleBody('t', 'qwen', i, { reward, candidate }));
  });
}

const qwen = (samples: StoredSample[]) => buildReport(samples).models.find((m) => m.model === 'qwen')!;

describe('report: duplicates of one sample id', () => {
  it('claims that disagree on the reward are disputed and left out of pass@k, whatever the peer ids', () => {
    const clean = qwen(honest);
    expect(clean).toMatchObject({ samples: 4, pass1: 0.5 });
    for (const liar of [EARLY, LATE])
      for (const own of [true, false]) {
        const all = [...honest, ...hijack(liar, [0, 2], own)];
        const report = buildReport(all);
        // Samples 0 and 2 are disputed: only 1 (pass) and 3 (fail) count.
        expect(report.models[0]).toMatchObject({ samples: 2, pass1: 0.5, disputed: 2 });
        expect(report.disputed.map((d) => d.sampleId).sort()).toEqual(
          [honest[0]!, honest[2]!].map((s) => s.digest.sampleId).sort(),
        );
        const d0 = report.disputed.find((d) => d.sampleId === honest[0]!.digest.sampleId)!;
        expect(d0.claims.map((c) => [c.origin, c.reward]).sort()).toEqual(
          [
            [HONEST, 1],
            [liar, 0],
          ].sort(),
        );
        // The input order changes nothing.
        expect(buildReport([...all].reverse())).toEqual(report);
      }
  });

  it('audits settle a dispute: the claim the re-score contradicted drops out, the confirmed one counts', () => {
    for (const liar of [EARLY, LATE]) {
      const lies = hijack(liar, [0, 2], true).map((s) => ({
        ...s,
        audit: 'failed' as const,
        auditReward: s.digest.reward === 1 ? 0 : 1,
        quarantined: true,
      }));
      const confirmed = honest.map((s, i) => (i === 0 || i === 2 ? { ...s, audit: 'passed' as const } : s));
      const report = buildReport([...confirmed, ...lies]);
      expect(report.disputed).toEqual([]);
      expect(report.models[0]).toMatchObject({ samples: 4, pass1: 0.5, disputed: 0, auditFailures: 2 });
    }
  });

  it('an honest redo (same sample id, same candidate and reward, another origin) counts once', () => {
    const redo = honest.map((s, i) => stored('12D3KooWRedoWorker', i + 1, s.body!));
    const report = buildReport([...honest, ...redo]);
    expect(report.disputed).toEqual([]);
    expect(report.models[0]).toMatchObject({ samples: 4, pass1: 0.5 });
  });

  it('a claim withheld (no body) cannot stand against an audited one', () => {
    const pending = { ...hijack(EARLY, [0], true)[0]!, bodyState: 'pending' as const, body: null };
    const confirmed = honest.map((s, i) => (i === 0 ? { ...s, audit: 'passed' as const } : s));
    expect(buildReport([...confirmed, pending]).models[0]).toMatchObject({
      samples: 4,
      pass1: 0.5,
      disputed: 0,
    });
    // Unaudited, the honest claim cannot be told from the withheld one.
    expect(buildReport([...honest, pending]).models[0]).toMatchObject({ samples: 3, disputed: 1 });
  });
});

describe('export: duplicates of one sample id', () => {
  const texts = (samples: StoredSample[]) =>
    selectRows(samples, TASKS, 1)
      .rows.map((r) => r.body.candidate)
      .sort();

  it('a member republishing verified sample ids with its own candidates gets none of them exported, whatever its id', () => {
    expect(texts(honest)).toEqual(['honest 0\n', 'honest 1\n']);
    for (const liar of [EARLY, LATE]) {
      // Same reward as the honest claims (1), other candidates: pass@k is unaffected, the text is disputed.
      const lies = [0, 1].map((i, n) =>
        stored(liar, n + 1, sampleBody('t', 'qwen', i, { reward: 1, candidate: `hijacked ${i}\n` })),
      );
      const selection = selectRows([...honest, ...lies], TASKS, 1);
      expect(selection.rows).toEqual([]);
      expect(selection.excluded.disputed).toBe(4);
      expect(buildReport([...honest, ...lies]).models[0]).toMatchObject({
        samples: 4,
        pass1: 0.5,
        disputed: 0,
      });
      // Audited: the confirmed claims are exported, the contradicted ones are not.
      const audited = [
        ...honest.map((s, i) => (i < 2 ? { ...s, audit: 'passed' as const } : s)),
        ...lies.map((s) => ({ ...s, audit: 'failed' as const, auditReward: 0, quarantined: true })),
      ];
      expect(texts(audited)).toEqual(['honest 0\n', 'honest 1\n']);
    }
  });

  it('claims that disagree on the reward are not exported until audits settle them', () => {
    for (const liar of [EARLY, LATE]) {
      const selection = selectRows([...honest, ...hijack(liar, [0, 3], false)], TASKS, 1);
      expect(selection.rows.map((r) => r.body.candidate)).toEqual(['honest 1\n']);
      expect(selection.excluded.disputed).toBe(4);
      // A disputed failing sample is no repair prompt either.
      expect(selection.failed.map((r) => r.body.candidate)).toEqual(['honest 2\n']);
    }
  });

  it('an honest redo is exported once', () => {
    const redo = honest.map((s, i) => stored('12D3KooWRedoWorker', i + 1, s.body!));
    const selection = selectRows([...redo, ...honest], TASKS, 1);
    expect(selection.rows.map((r) => r.body.candidate).sort()).toEqual(['honest 0\n', 'honest 1\n']);
    expect(selection.excluded['same-sample-other-origin']).toBe(4);
    expect(selection.excluded.disputed).toBe(0);
  });
});

describe('vtnode report and export on a dataset with a dispute', () => {
  it('report lists the disputed sample id and leaves it out; export leaves it out and says why', async () => {
    const tmp = await tempDir('vtnode-hijack-');
    const ds = join(tmp.dir, 'ds');
    const store = openDatasetStore(ds);
    const [honestSigner, liarSigner] = await Promise.all([testSigner(), testSigner()]);
    for (const [i, body] of honest.map((s) => s.body!).entries()) {
      const d = signedDigest(honestSigner, i + 1, body);
      store.addDigest(d);
      store.putBody(d, body);
    }
    const lie = sampleBody('t', 'qwen', 0, { reward: 0, candidate: 'honest 0\n' });
    const d = signedDigest(liarSigner, 1, lie);
    store.addDigest(d);
    store.putBody(d, lie);
    store.putTasks([TASK]);
    store.close();
    const human = await vtnode(['report', '--from', ds]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/qwen\s+1\s+3\s+33\.3%/);
    expect(human.stdout).toMatch(/note: 1 sample ids left out: their nodes claim different rewards/);
    const json = JSON.parse((await vtnode(['report', '--from', ds, '--json'])).stdout);
    expect(json.disputed).toHaveLength(1);
    expect(json.disputed[0].claims.map((c: { origin: string }) => c.origin).sort()).toEqual(
      [honestSigner.origin, liarSigner.origin].sort(),
    );
    const out = join(tmp.dir, 'hf');
    const r = await vtnode(['export', '--from', ds, '--format', 'hf', '--out', out, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(r.stdout);
    expect(manifest.counts).toMatchObject({ rows: 1, excluded: { disputed: 2 } });
    await tmp.cleanup();
  }, 60_000);
});
