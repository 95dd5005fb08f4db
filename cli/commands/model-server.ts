import { CliError, type Command } from '../command.ts';
import { commandLine, count, group, int, list, number, oneOf, port, positive, string } from '../options.ts';

/** The servers `--emulate` imitates (node/model-server/flavours.ts's EmulateKind, which a test keeps equal). */
export const EMULATE_KINDS = ['llama-server', 'vllm', 'ollama', 'mlx'] as const;

/** The answer scripts (node/model-server/script.ts's ScriptMode, which a test keeps equal). */
export const SCRIPT_MODES = ['reference', 'mutants', 'garbage', 'truncate', 'mixed'] as const;

const line = commandLine({
  prose: `Usage: vtnode model-server --port P --emulate llama-server|vllm|ollama|mlx --tasks FILE [options]

An OpenAI-compatible model server for dry runs, drills, tests and benchmarks. It has no weights:
its answers are scripted from the tasks' references, and it imitates a real server's endpoints,
usage fields, prompt cache and timing. Not for real generation.`,
  groups: [
    group('Options:', {
      port: port({
        doc: 'TCP port (0 picks a free one; the URL is printed on stdout as JSON)',
        value: 'P',
        required: true,
      }),
      host: string({ doc: 'interface to listen on', value: 'H', default: '127.0.0.1' }),
      emulate: oneOf(EMULATE_KINDS, {
        doc: 'the server imitated (endpoints, usage, timings, what n does)',
        value: 'KIND',
        required: true,
      }),
      tasks: string({
        doc: 'tasks.jsonl whose prompts are recognised (references from workspace.root + target)',
        value: 'FILE',
        required: true,
      }),
      model: list({
        doc: 'model id listed by /v1/models (repeatable; default vtnode-emulated-coder)',
        value: 'ID',
      }),
      'prefill-tps': positive({
        doc: 'prompt tokens evaluated per second, uncached part only',
        value: 'N',
        default: 1500,
      }),
      'decode-tps': positive({ doc: 'output tokens per second per request', value: 'N', default: 40 }),
      'time-scale': number({
        doc: 'multiplies every simulated duration (default 1; 0.01 = 100x faster)',
        min: 0,
        default: 1,
      }),
      'cache-prompts': count({ doc: 'prompts held in the LRU prompt cache', value: 'C', default: 4 }),
      concurrency: int({ doc: 'requests processed at once; more wait', min: 1, default: 1 }),
      'share-prefill': oneOf(['on', 'off'] as const, {
        doc: "a request waits for an identical prompt's running prefill instead of evaluating it again (default: as the emulated server: on for vllm, off else)",
      }),
      context: int({ doc: 'context length reported by /props or /api/ps', min: 1, default: 32_768 }),
      script: oneOf(SCRIPT_MODES, { doc: 'what the answers are', value: 'MODE', default: 'mixed' }),
      fault: list({
        doc: 'fault injection, comma-separated: error=0.1,hang=0.05,drop=0.05,garbage=0.1,slow=0.2,slow-factor=10,seed=7 (rates are shares of chat requests; change them at runtime with POST /vtnode/emulator/faults)',
        value: 'SPEC',
      }),
    }),
  ],
});

const FAULT_KEYS: Record<string, string> = {
  error: 'errorRate',
  garbage: 'garbageRate',
  hang: 'hangRate',
  drop: 'dropRate',
  slow: 'slowRate',
  'slow-factor': 'slowFactor',
  seed: 'seed',
};

/** Parses `--fault error=0.1,hang=0.05,...` into the emulator's Faults fields. */
export function parseFaultSpec(spec: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [key, value, extra] = part.split('=');
    const field = key ? FAULT_KEYS[key] : undefined;
    if (!field || value === undefined || extra !== undefined)
      throw new CliError(
        `--fault: bad entry "${part}" (expected ${Object.keys(FAULT_KEYS).join('|')}=NUMBER)`,
        2,
      );
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n))
      throw new CliError(`--fault: ${key} must be a number, got "${value}"`, 2);
    out[field] = n;
  }
  return out;
}

export const command: Command = {
  name: 'model-server',
  summary: 'run an emulated OpenAI-compatible model server (dry runs, drills, tests)',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const { createEmulator, Faults } = await import('../../node/model-server/emulator.ts');
    const { readTasks } = await import('../../sandbox/tasks-file.ts');
    const { parseWith } = await import('../../protocol/parse.ts');
    let faults: ReturnType<typeof Faults.parse>;
    try {
      faults = parseWith(Faults, Object.assign({}, ...(values.fault ?? []).map(parseFaultSpec)), '--fault');
    } catch (err) {
      if (err instanceof CliError) throw err;
      throw new CliError((err as Error).message, 2);
    }
    const options = {
      prefillTps: values['prefill-tps'],
      decodeTps: values['decode-tps'],
      timeScale: values['time-scale'],
      cachePrompts: values['cache-prompts'],
      concurrency: values.concurrency,
      context: values.context,
      ...(values['share-prefill'] !== undefined ? { sharePrefill: values['share-prefill'] === 'on' } : {}),
    };
    let tasks: Awaited<ReturnType<typeof readTasks>>;
    try {
      tasks = await readTasks(values.tasks);
    } catch (err) {
      throw new CliError(`--tasks: ${(err as Error).message}`);
    }
    let emulator: Awaited<ReturnType<typeof createEmulator>>;
    try {
      emulator = await createEmulator({
        emulate: values.emulate,
        port: values.port,
        host: values.host,
        tasks,
        ...(values.model ? { models: values.model } : {}),
        ...options,
        script: values.script,
        faults,
      });
    } catch (err) {
      throw new CliError(`cannot start: ${(err as Error).message}`);
    }
    process.stdout.write(
      `${JSON.stringify({ url: emulator.url, emulate: values.emulate, tasks: tasks.length })}\n`,
    );
    process.stderr.write(
      `vtnode model-server: emulating ${values.emulate} on ${emulator.url} (${tasks.length} tasks); a test server, not a model\n`,
    );
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await emulator.close();
    return 0;
  },
};
