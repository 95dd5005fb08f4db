// A foreground node shows the campaigns running through it: one info line per job (accepted,
// finished or stopped) and per verified sample (node/worker/info-lines.ts, wired in the executor).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { digestOf } from '../../node/digests/codec.ts';
import { signatureError } from '../../node/digests/signature.ts';
import { createLogging, setLogging } from '../../node/logger.ts';
import type { ModelService } from '../../node/models/service.ts';
import type { StreamHost } from '../../node/wire/streams.ts';
import { createJobExecutor } from '../../node/worker/executor.ts';
import {
  jobAcceptedLine,
  jobFinishedLine,
  sampleLine,
  shortId,
  showReward,
} from '../../node/worker/info-lines.ts';
import { openSampleLog } from '../../node/worker/sample-log.ts';
import { type Task, taskHash } from '../../protocol/task.ts';
import { logging } from '../../sandbox/log.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { seededSigner } from '../helpers/digests.ts';
import { logRecords } from '../helpers/log-lines.ts';
import { notYet, pollFor } from '../helpers/poll.ts';
import { EVAL_FP, jobRequest, sampleBody, sampleTask } from '../helpers/samples.ts';

describe('the lines', () => {
  const job = jobRequest(sampleTask('t-lines'), 'peer-s', [0, 1, 2], 4);

  it('a job accepted: campaign, task, model, samples, and how many were already scored', () => {
    expect(jobAcceptedLine(job, 0)).toBe(
      'job t-lines#qwen#1 accepted: campaign c1, task t-lines, model qwen, 3 samples',
    );
    expect(jobAcceptedLine(job, 2)).toBe(
      'job t-lines#qwen#1 accepted: campaign c1, task t-lines, model qwen, 3 samples (2 already scored)',
    );
  });

  it('a job over: scored of asked, passed (reward 1), mean reward; or why it stopped', () => {
    expect(jobFinishedLine(job, [1, 0, 0.5], null)).toBe(
      'job t-lines#qwen#1 finished: campaign c1, task t-lines, model qwen, 3 of 3 samples scored, 1 passed, mean reward 0.5',
    );
    expect(jobFinishedLine(job, [1], { reason: 'deadline' })).toBe(
      'job t-lines#qwen#1 stopped (deadline): campaign c1, task t-lines, model qwen, 1 of 3 samples scored, 1 passed, mean reward 1',
    );
    expect(jobFinishedLine(job, [], { reason: 'model-error' })).toMatch(
      /0 of 3 samples scored, 0 passed, mean reward -$/,
    );
  });

  it('a sample: short id, task, model, index, reward; verified only when it passes; truncated said', () => {
    const passed = sampleBody('t-lines', 'qwen', 1, { reward: 1 });
    expect(sampleLine(passed)).toBe(
      `sample ${passed.sampleId.slice(7, 15)} verified: task t-lines, model qwen, index 1, reward 1`,
    );
    const body = sampleBody('t-lines', 'qwen', 2, { reward: 1 / 3 });
    expect(sampleLine(body)).toBe(
      `sample ${body.sampleId.slice(7, 15)} scored: task t-lines, model qwen, index 2, reward 0.333`,
    );
    const cut = { ...body, generation: { ...body.generation, truncated: true } };
    expect(sampleLine(cut)).toMatch(/reward 0\.333 \(truncated\)$/);
  });

  it('short ids and rewards', () => {
    expect(shortId(`sha256:${'ab'.repeat(32)}`)).toBe('abababab');
    expect(shortId('plain')).toBe('plain');
    expect([0, 1, 0.5, 2 / 3, 0.0004].map(showReward)).toEqual(['0', '1', '0.5', '0.667', '0']);
  });
});

describe('the executor prints them at info level', () => {
  const original = logging();
  afterEach(() => setLogging(original));

  /** An executor with a fake model and scorer (sample 0 passes, others fail; `fail()` breaks the box). */
  async function setup(spec: string, jobLines?: boolean) {
    const out = new PassThrough();
    let text = '';
    out.on('data', (d) => {
      text += d;
    });
    setLogging(createLogging({ spec, destination: out }));
    const dir = await mkdtemp(join(tmpdir(), 'vt-info-'));
    const signer = await seededSigner(9);
    const sampleLog = openSampleLog({ path: join(dir, 'samples.db'), origin: signer.origin, signer });
    const task = sampleTask('t-info');
    let failScoring = false;
    const scorer = {
      confinement: { name: 'bwrap' },
      selfTest: null,
      fingerprint: async () => EVAL_FP,
      close: async () => {},
      score: async (request: { task: Task; candidate: string }) => {
        if (failScoring) throw new Error('box could not be set up');
        const reward = request.candidate.includes('// 0') ? 1 : 0;
        return {
          ...{ taskId: request.task.id, status: 'scored', error: null, reward, passRate: reward },
          ...{ passed: reward, failed: 1 - reward, skipped: 0, todo: 0, reasons: [], tests: [], lints: [] },
          ...{ tamper: [], typecheck: 'not-configured', diagnostics: '', warnings: [], fingerprint: EVAL_FP },
          ...{ backend: 'bwrap', run: null, typecheckRun: null, typecheckService: null },
        };
      },
    } as unknown as Scorer;
    const models = {
      adapterFor: () => ({}),
      async *generate(request: { k: number; seeds: number[] }) {
        for (let index = 0; index < request.k; index++) {
          const code = `export const x = 1; // ${index}\n`;
          yield {
            ...{ ok: true, index, seed: request.seeds[index]!, choice: 0, model: 'qwen' },
            ...{ server: 'http://127.0.0.1:1', text: `\`\`\`ts\n${code}\`\`\``, finishReason: 'stop' },
            ...{ extract: { ok: true, code, lang: 'ts' }, truncated: false, attempts: 1 },
            ...{ usage: { promptTokens: 100, completionTokens: 10, cachedTokens: null } },
            ...{ warm: { warm: 'unknown', source: null }, latencyMs: 10, ttftMs: null, tokensPerSecond: 100 },
          };
        }
      },
    } as unknown as ModelService;
    const executor = createJobExecutor({
      host: { handle: async () => {}, unhandle: async () => {} } as unknown as StreamHost,
      peerId: signer.origin,
      models,
      scorer,
      workspaces: new Map([[task.workspace.id, dir]]),
      sampleLog,
      maxJobs: 2,
      maxScoring: 1,
      ...(jobLines === undefined ? {} : { jobLines }),
    });
    const records = () => logRecords(text).filter((r) => r.component === 'vtnode:worker:executor');
    const cleanup = async () => {
      await executor.stop();
      sampleLog.close();
      await rm(dir, { recursive: true, force: true });
    };
    const fail = () => {
      failScoring = true;
    };
    return { executor, signer, task, sampleLog, records, text: () => text, cleanup, fail };
  }

  /** Waits until `ok()` holds (bounded: 10 s). */
  async function until(ok: () => boolean, what: () => string) {
    await pollFor(() => ok() || notYet(what()), { what: 'the log records', timeoutMs: 10_000, pauseMs: 1 });
  }

  it('accepted, one line per scored sample, finished; a re-run says what was already scored; a failure stops', async () => {
    // No component named: info lines show at the default threshold, debug lines do not.
    const { executor, signer, task, records, text, cleanup, fail } = await setup('');
    const infos = () => records().filter((r) => r.level === 30);
    const lines = (n: number) =>
      until(
        () => infos().length >= n,
        () => `${n} info lines:\n${text()}`,
      );
    const wires = [executor.local(), executor.local(), executor.local()];
    try {
      await wires[0]!.send({ ...jobRequest(task, signer.origin, [0, 1], 2), jobId: 'job-1' });
      await lines(4);
      const first = infos().map((r) => r.msg);
      expect(first[0]).toBe('job job-1 accepted: campaign c1, task t-info, model qwen, 2 samples');
      expect(first.slice(1, 3)).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^sample [0-9a-f]{8} verified: task t-info, model qwen, index 0, reward 1$/),
          expect.stringMatching(/^sample [0-9a-f]{8} scored: task t-info, model qwen, index 1, reward 0$/),
        ]),
      );
      expect(first[3]).toBe(
        'job job-1 finished: campaign c1, task t-info, model qwen, 2 of 2 samples scored, 1 passed, mean reward 0.5',
      );
      // The same samples again (a re-placed job): reported from the log, said in the accepted line.
      await wires[1]!.send({ ...jobRequest(task, signer.origin, [0, 1], 2), jobId: 'job-2' });
      await lines(6);
      expect(infos()[4]!.msg).toMatch(/^job job-2 accepted: .* 2 samples \(2 already scored\)$/);
      expect(infos()[5]!.msg).toMatch(/^job job-2 finished: .* 2 of 2 samples scored, 1 passed/);
      // A sample the sandbox cannot score: no sample line, the job stops and says why.
      fail();
      await wires[2]!.send({ ...jobRequest(task, signer.origin, [2], 3), jobId: 'job-3' });
      await lines(8);
      expect(infos()[6]!.msg).toBe('job job-3 accepted: campaign c1, task t-info, model qwen, 1 samples');
      expect(infos()[7]!.msg).toBe(
        'job job-3 stopped (sandbox-error): campaign c1, task t-info, model qwen, 0 of 1 samples scored, 0 passed, mean reward -',
      );
      // No debug lines at the default threshold.
      expect(logRecords(text()).filter((r) => r.level < 30)).toEqual([]);
    } finally {
      for (const w of wires) w.abort(new Error('test over'));
      await cleanup();
    }
  });

  it("jobLines false (`vtnode run`'s own node): the same lines, at debug level only", async () => {
    const { executor, signer, task, records, text, cleanup } = await setup('vtnode:worker', false);
    const wire = executor.local();
    try {
      await wire.send({ ...jobRequest(task, signer.origin, [0], 1), jobId: 'job-q' });
      await until(
        () => records().some((r) => r.msg.startsWith('job job-q finished')),
        () => `the job's end:\n${text()}`,
      );
      const ours = records().filter((r) => / accepted: | verified: | scored: | finished: /.test(r.msg));
      expect(ours.map((r) => r.level)).toEqual([20, 20, 20]);
      expect(records().filter((r) => r.level === 30)).toEqual([]);
    } finally {
      wire.abort(new Error('test over'));
      await cleanup();
    }
  });

  it('a job’s samples are logged with its task row: v2 digests commit to its hash, the log serves the row', async () => {
    const { executor, signer, task, sampleLog, records, text, cleanup } = await setup('vtnode:worker');
    const wire = executor.local();
    try {
      await wire.send({ ...jobRequest(task, signer.origin, [0, 1], 2), jobId: 'job-t' });
      await until(
        () => records().some((r) => /^job job-t finished/.test(String(r.msg))),
        () => `the job to finish:\n${text()}`,
      );
      const digests = sampleLog.digestsSince(0, 10);
      expect(digests).toHaveLength(2);
      for (const d of digests) {
        expect(d).toMatchObject({ v: 2, taskHash: taskHash(task) });
        expect(signatureError(d)).toBeNull();
        // What the worker gossips is what it serves.
        expect(digestOf(sampleLog.get(d.sampleId)!)).toEqual(d);
      }
      expect(sampleLog.getTaskRows([taskHash(task)])).toEqual([{ hash: taskHash(task), task }]);
    } finally {
      wire.abort(new Error('test over'));
      await cleanup();
    }
  });
});
