// Fakes of a worker's scorer and model service for executor tests: every sample is one code block,
// every score a pass, each released when the test says so.
import { AbortedError } from '../../node/models/errors.ts';
import type { ModelService } from '../../node/models/service.ts';
import type { JobExecutor } from '../../node/worker/executor.ts';
import type { JobRequest, WorkerMessage } from '../../protocol/job.ts';
import type { Task } from '../../protocol/task.ts';
import type { ScoreResult, Scorer } from '../../sandbox/scorer.ts';
import { notYet, pollFor } from './poll.ts';
import { EVAL_FP } from './samples.ts';

/** A scorer whose every call passes (reward 1) once `gate()` resolves (at once by default). */
export function fakeScorer(gate: () => Promise<void> = async () => {}): Scorer {
  return {
    confinement: { name: 'bwrap' },
    selfTest: null,
    fingerprint: async () => EVAL_FP,
    close: async () => {},
    score: (request: { task: Task }) => gate().then(() => scoreResult(request.task.id)),
  } as unknown as Scorer;
}

/** One generated sample, as the adapter yields it: a single code block. */
function fakeSample(index: number, seed: number) {
  return {
    ok: true,
    index,
    seed,
    choice: 0,
    model: 'qwen',
    server: 'http://127.0.0.1:1',
    text: '```ts\nexport const x = 1;\n```',
    extract: { ok: true, code: 'export const x = 1;\n', lang: 'ts' },
    finishReason: 'stop',
    truncated: false,
    usage: { promptTokens: 100, completionTokens: 10, cachedTokens: null },
    warm: { warm: 'unknown', source: null },
    latencyMs: 10,
    ttftMs: null,
    tokensPerSecond: 100,
    attempts: 1,
  };
}

/** A model service that answers each of a job's k samples at once with one code block. */
export function fakeModels(): ModelService {
  return {
    adapterFor: () => ({}),
    async *generate(request: { k: number; seeds: number[] }) {
      for (let index = 0; index < request.k; index++) yield fakeSample(index, request.seeds[index]!);
    },
  } as unknown as ModelService;
}

/**
 * A model service that answers the first `answered` samples of a job at once, then hangs until the
 * job's signal aborts and throws AbortedError, as the real adapter does when the job is aborted while
 * its requests are in flight (node/models/adapter.ts: the drain throws the fan-out's rejection).
 */
export function stallingModels(answered: number): ModelService {
  return {
    adapterFor: () => ({}),
    async *generate(request: { k: number; seeds: number[]; signal: AbortSignal }) {
      for (let index = 0; index < Math.min(answered, request.k); index++)
        yield fakeSample(index, request.seeds[index]!);
      await new Promise<void>((resolve) => {
        if (request.signal.aborted) resolve();
        request.signal.addEventListener('abort', () => resolve());
      });
      throw new AbortedError();
    },
  } as unknown as ModelService;
}

/** A scorer whose runs finish when the test says (a run under way winds down on its own time). */
export function heldScorer() {
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  let started = 0;
  let settled = 0;
  const inner = fakeScorer(() => released);
  const scorer: Scorer = {
    ...inner,
    score: async (request) => {
      started++;
      try {
        return await inner.score(request);
      } finally {
        settled++;
      }
    },
  };
  return { scorer, release, started: () => started, inFlight: () => started - settled };
}

/** A job sent on a local stream to `executor`: the answers collected until its end or refusal, and a cancel. */
export function localJob(executor: JobExecutor, request: JobRequest) {
  const wire = executor.local();
  const messages: WorkerMessage[] = [];
  const done = (async () => {
    await wire.send(request);
    for (let m = await wire.read(); m !== undefined; m = await wire.read()) {
      messages.push(m);
      if (m.type === 'end' || m.type === 'refused') break;
    }
    wire.abort(new Error('test over'));
    return messages;
  })();
  return { messages, done, cancel: () => wire.send({ type: 'cancel', jobId: request.jobId }) };
}

/** Waits (5 s at most, polling every 5 ms) until `ok()`; `seen()` says on timeout what was there instead. */
export async function until(ok: () => boolean, what: string, seen?: () => unknown): Promise<void> {
  await pollFor(() => ok() || notYet(seen ? seen() : false), { what, timeoutMs: 5000, pauseMs: 5 });
}

/** A sandbox run's result for `taskId`: scored, every test passed (`overrides` vary it). */
export function scoreResult(taskId: string, overrides: Partial<ScoreResult> = {}): ScoreResult {
  return {
    taskId,
    status: 'scored',
    error: null,
    reward: 1,
    passRate: 1,
    passed: 2,
    failed: 0,
    skipped: 0,
    todo: 0,
    reasons: [],
    tests: [],
    lints: [],
    tamper: [],
    typecheck: 'not-configured',
    diagnostics: '',
    warnings: [],
    fingerprint: EVAL_FP,
    backend: 'bwrap',
    run: null,
    typecheckRun: null,
    typecheckService: null,
    ...overrides,
  };
}
