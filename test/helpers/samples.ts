import { fingerprint } from '../../protocol/canonical.ts';
import { type JobRequest, type SampleResult, sampleId, sampleSeed } from '../../protocol/job.ts';
import { contentHash, type SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';

export const EVAL_FP = fingerprint({ judge: 'vitest', scorer: 1 });
export const PROMPT_FP = fingerprint([{ role: 'user', content: 'write add()' }]);

/** A valid scored sample body for (task, model, index); `candidate` and `reward` vary it. */
export function sampleBody(
  taskId: string,
  model: string,
  index: number,
  opts: { candidate?: string; reward?: number; seedBase?: number; split?: 'train' | 'eval' } = {},
): SampleBody {
  const seed = sampleSeed(opts.seedBase ?? 1000, index);
  const candidate = opts.candidate ?? `export const add = (a: number, b: number) => a + b; // ${index}\n`;
  const reward = opts.reward ?? 1;
  return {
    v: 1,
    sampleId: sampleId(taskId, model, index, seed),
    taskId,
    split: opts.split ?? 'train',
    promptFingerprint: PROMPT_FP,
    model,
    index,
    candidate,
    contentHash: contentHash(candidate),
    generation: {
      sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase: opts.seedBase ?? 1000 },
      seed,
      finishReason: 'stop',
      truncated: false,
      usage: { prompt: 1200, completion: 40, cached: index === 0 ? 0 : 1184 },
      warm: index > 0,
      latencyMs: 850,
      tokensPerSecond: 47.1,
    },
    score: {
      reward,
      passed: reward === 1 ? 4 : 2,
      failed: reward === 1 ? 0 : 2,
      reasons: reward === 1 ? [] : ['tests-failed'],
      evalFingerprint: EVAL_FP,
      diagnostics: '',
    },
    jobId: `${taskId}#${model}#1`,
    scoredAt: 1_790_000_000_000 + index,
  };
}

/** A valid task (workspace and judge filled in). */
export function sampleTask(id: string, promptText = 'write add()'): Task {
  const messages = [{ role: 'user' as const, content: promptText }];
  return {
    id,
    kind: 'file',
    workspace: { id: fingerprint({ ws: 'demo' }), commit: 'abc123', clean: true },
    module: 'math',
    group: 'math',
    split: 'train',
    target: 'src/add.ts',
    messages,
    promptFingerprint: fingerprint(messages),
    judge: {
      runner: 'vitest',
      testFiles: ['test/add.test.ts'],
      timeoutMs: 60_000,
      typecheck: null,
      flaky: false,
    },
    referenceHash: fingerprint('reference'),
    minedAt: 'abc123',
    mustDeclare: ['add'],
    minerVersion: '0.1.0',
  };
}

/** A job request for `task` asking for `samples` of k. */
export function jobRequest(task: Task, submitter: string, samples: number[], k = 8): JobRequest {
  return {
    type: 'job',
    jobId: `${task.id}#qwen#1`,
    campaign: 'c1',
    task,
    model: 'qwen',
    k,
    samples,
    sampling: { temperature: 0.8, topP: 0.95, maxTokens: 2048, seedBase: 1000 },
    deadlineMs: 60_000,
    submitter,
  };
}

/** The worker's result for sample `index` of `request` (without type and jobId, as JobChannel.sample takes it). */
export function resultFor(
  request: JobRequest,
  index: number,
  seq = index + 1,
): Omit<SampleResult, 'type' | 'jobId'> {
  const seed = sampleSeed(request.sampling.seedBase, index);
  return {
    sampleId: sampleId(request.task.id, request.model, index, seed),
    index,
    seed,
    reward: index % 2 === 0 ? 1 : 0.5,
    passed: 2,
    failed: index % 2,
    reasons: index % 2 === 0 ? [] : ['tests-failed'],
    truncated: false,
    usage: { prompt: 1200, completion: 60, cached: index === request.samples[0] ? 0 : 1184 },
    warm: index !== request.samples[0],
    latencyMs: 1000,
    tokensPerSecond: 60,
    contentHash: contentHash(`candidate ${index}`),
    evalFingerprint: EVAL_FP,
    seq,
  };
}
