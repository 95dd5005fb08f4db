/**
 * Warm-then-fan-out (k-1 requests, or one n = k-1 request) vs. naive fan-out vs. sequential, on the emulated llama-server
 * (`vtnode model-server` library, no weights): k samples of each task's 12k-token prompt.
 *
 *   npx node bench/models/fanout.ts [--tasks 12] [-k 8] [--concurrency 4] [--time-scale 0.002]
 *
 * Reports prefill tokens ÷ the oracle minimum (one full prefill per task), cache hit rate and wall
 * time, each strategy against naive fan-out measured in the same run.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { createEmulator } from '../../node/model-server/emulator.ts';
import { createModelAdapter } from '../../node/models/adapter.ts';
import { fingerprint, sha256Hex } from '../../protocol/canonical.ts';
import type { ChatMessage, Task } from '../../protocol/task.ts';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '12' },
    k: { type: 'string', short: 'k', default: '8' },
    concurrency: { type: 'string', default: '4' },
    'time-scale': { type: 'string', default: '0.002' },
    'prompt-tokens': { type: 'string', default: '12000' },
    'max-tokens': { type: 'string', default: '600' },
    jobs: { type: 'string', default: '1' },
  },
});
const T = Number(values.tasks);
const K = Number(values.k);
const CONC = Number(values.concurrency);
const SCALE = Number(values['time-scale']);
const PROMPT_TOKENS = Number(values['prompt-tokens']);
const MAX_TOKENS = Number(values['max-tokens']);
const JOBS = Number(values.jobs);
const MODEL = 'vtnode-emulated-coder';

/** Runs `each` over `items` with `jobs` of them in flight at once (a worker running several jobs). */
async function pool<T>(items: T[], jobs: number, each: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: jobs }, async () => {
      while (next < items.length) await each(items[next++]!);
    }),
  );
}

const dir = await mkdtemp(join(tmpdir(), 'vtnode-bench-fanout-'));
try {
  await mkdir(join(dir, 'src'));
  const tasks: Task[] = [];
  for (let i = 0; i < T; i++) {
    const target = `src/f${i}.ts`;
    const reference = `export function f${i}(x: number): number {\n  return x + ${i};\n}\n`;
    await writeFile(join(dir, target), reference);
    const messages: ChatMessage[] = [
      { role: 'user', content: `task ${i}\n`.padEnd(PROMPT_TOKENS * 4, `// context line of task ${i}\n`) },
    ];
    tasks.push({
      id: `t${i}`,
      kind: 'file',
      workspace: { id: fingerprint(dir), commit: null, clean: false, root: dir },
      module: 'm',
      group: 'g',
      split: 'train',
      target,
      messages,
      promptFingerprint: fingerprint(messages),
      judge: {
        runner: 'node:test',
        testFiles: ['t.test.ts'],
        timeoutMs: 60_000,
        typecheck: null,
        flaky: false,
      },
      referenceHash: `sha256:${sha256Hex(reference)}`,
      minedAt: 'uncommitted',
      mustDeclare: [],
      minerVersion: 'bench',
    });
  }

  // truncate: every answer is exactly MAX_TOKENS long, so decode time is the same in every strategy.
  const emulator = await createEmulator({
    emulate: 'llama-server',
    tasks,
    concurrency: CONC,
    cachePrompts: 4,
    prefillTps: 1500,
    decodeTps: 40,
    timeScale: SCALE,
    script: 'truncate',
  });
  const client = new OpenAI({ baseURL: `${emulator.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const body = (t: Task, seed: number) => ({
    model: MODEL,
    messages: t.messages,
    seed,
    max_tokens: MAX_TOKENS,
  });

  const viaAdapter = async (useN: boolean) => {
    const adapter = createModelAdapter({
      url: emulator.url,
      behaviour: 'llama-server',
      concurrency: CONC,
      useN,
    });
    await pool(tasks, JOBS, async (t) => {
      for await (const o of adapter.generate({
        model: MODEL,
        messages: t.messages,
        k: K,
        sampling: { maxTokens: MAX_TOKENS },
      }))
        if (!o.ok) throw o.error;
    });
  };

  const strategies: Record<string, () => Promise<void>> = {
    'naive fan-out (k at once)': async () => {
      await pool(tasks, JOBS, async (t) => {
        await Promise.all(Array.from({ length: K }, (_, s) => client.chat.completions.create(body(t, s))));
      });
    },
    sequential: async () => {
      await pool(tasks, JOBS, async (t) => {
        for (let s = 0; s < K; s++) await client.chat.completions.create(body(t, s));
      });
    },
    'warm then fan out (adapter)': () => viaAdapter(false),
    'warm then n = k-1, at most the slots (adapter)': () => viaAdapter(true),
  };

  const rows: { name: string; wall: number; prefill: number; hit: number }[] = [];
  const oracle = tasks.reduce((s, t) => s + Math.ceil(t.messages[0]!.content.length / 4) + 4, 0);
  for (const [name, run] of Object.entries(strategies)) {
    emulator.reset();
    const t0 = performance.now();
    await run();
    const wall = performance.now() - t0;
    const st = emulator.stats();
    rows.push({
      name,
      wall,
      prefill: st.prefillTokens / oracle,
      hit: st.cacheHits / (st.cacheHits + st.cacheMisses),
    });
  }
  await emulator.close();
  const base = rows[0]!;
  console.log(
    `${JOBS} job(s) in flight, tasks ${T} x k ${K}, ${PROMPT_TOKENS}-token prompts, ${MAX_TOKENS}-token answers, llama-server emulation: ` +
      `${CONC} slots, prefill 1500 tok/s (one engine), decode 40 tok/s per slot, LRU of 4 prompts, time scale ${SCALE}`,
  );
  console.log('| strategy | prefill ÷ oracle | cache hit rate | wall time ÷ naive | simulated wall (s) |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const r of rows)
    console.log(
      `| ${r.name} | ${r.prefill.toFixed(2)} | ${(r.hit * 100).toFixed(1)}% | ${(r.wall / base.wall).toFixed(2)} | ${(r.wall / 1000 / SCALE).toFixed(0)} |`,
    );
} finally {
  await rm(dir, { recursive: true, force: true });
}
