import { CliError, type Command, intOption, parseOptions } from '../command.ts';

const usage = `Usage: vtnode model-server --port P --emulate llama-server|vllm|ollama|mlx --tasks FILE [options]

An OpenAI-compatible model server for dry runs, drills, tests and benchmarks. It has no weights:
its answers are scripted from the tasks' references, and it imitates a real server's endpoints,
usage fields, prompt cache and timing. Not for real generation.

Options:
  --port P              TCP port (0 picks a free one; the URL is printed on stdout as JSON)
  --host H              interface to listen on (default 127.0.0.1)
  --emulate KIND        llama-server | vllm | ollama | mlx (endpoints, usage, timings, what n does)
  --tasks FILE          tasks.jsonl whose prompts are recognised (references from workspace.root + target)
  --model ID            model id listed by /v1/models (repeatable; default vtnode-emulated-coder)
  --prefill-tps N       prompt tokens evaluated per second, uncached part only (default 1500)
  --decode-tps N        output tokens per second per request (default 40)
  --time-scale X        multiplies every simulated duration (default 1; 0.01 = 100x faster)
  --cache-prompts C     prompts held in the LRU prompt cache (default 4)
  --concurrency N       requests processed at once; more wait (default 1)
  --share-prefill on|off  a request waits for an identical prompt's running prefill instead of
                        evaluating it again (default: as the emulated server: on for vllm, off else)
  --context N           context length reported by /props or /api/ps (default 32768)
  --script MODE         reference | mutants | garbage | truncate | mixed (default mixed)
  --fault SPEC          fault injection, comma-separated: error=0.1,hang=0.05,drop=0.05,garbage=0.1,
                        slow=0.2,slow-factor=10,seed=7 (rates are shares of chat requests; change them at
                        runtime with POST /vtnode/emulator/faults)
`;

function numberOption(value: string | undefined, name: string, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min)
    throw new CliError(`--${name} must be a number >= ${min}, got "${value}"`, 2);
  return n;
}

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
  usage,
  async run(argv) {
    const { values } = parseOptions(
      argv,
      {
        port: { type: 'string' },
        host: { type: 'string' },
        emulate: { type: 'string' },
        tasks: { type: 'string' },
        model: { type: 'string', multiple: true },
        'prefill-tps': { type: 'string' },
        'decode-tps': { type: 'string' },
        'time-scale': { type: 'string' },
        'cache-prompts': { type: 'string' },
        concurrency: { type: 'string' },
        'share-prefill': { type: 'string' },
        context: { type: 'string' },
        script: { type: 'string' },
        fault: { type: 'string', multiple: true },
      },
      usage,
    );
    const { createEmulator, EmulateKind, Faults } = await import('../../node/model-server/emulator.ts');
    const { ScriptMode } = await import('../../node/model-server/script.ts');
    const { readTasks } = await import('../../sandbox/tasks-file.ts');
    const { parseWith } = await import('../../protocol/parse.ts');
    if (values.port === undefined) throw new CliError(`--port is required\n\n${usage}`, 2);
    const emulate = EmulateKind.safeParse(values.emulate);
    if (!emulate.success)
      throw new CliError(
        `--emulate must be one of ${EmulateKind.options.join(', ')}, got "${values.emulate ?? ''}"`,
        2,
      );
    const script = ScriptMode.safeParse(values.script ?? 'mixed');
    if (!script.success)
      throw new CliError(
        `--script must be one of ${ScriptMode.options.join(', ')}, got "${values.script}"`,
        2,
      );
    if (values.tasks === undefined) throw new CliError(`--tasks is required\n\n${usage}`, 2);
    const share = values['share-prefill'];
    if (share !== undefined && share !== 'on' && share !== 'off')
      throw new CliError(`--share-prefill must be on or off, got "${share}"`, 2);
    const port = intOption(values.port, 'port', 0);
    if (port > 65535) throw new CliError(`--port must be at most 65535, got ${port}`, 2);
    let faults: ReturnType<typeof Faults.parse>;
    try {
      faults = parseWith(Faults, Object.assign({}, ...(values.fault ?? []).map(parseFaultSpec)), '--fault');
    } catch (err) {
      if (err instanceof CliError) throw err;
      throw new CliError((err as Error).message, 2);
    }
    const options = {
      prefillTps: numberOption(values['prefill-tps'], 'prefill-tps', 1500, 1e-9),
      decodeTps: numberOption(values['decode-tps'], 'decode-tps', 40, 1e-9),
      timeScale: numberOption(values['time-scale'], 'time-scale', 1),
      cachePrompts: intOption(values['cache-prompts'], 'cache-prompts', 4),
      concurrency: Math.max(1, intOption(values.concurrency, 'concurrency', 1)),
      context: Math.max(1, intOption(values.context, 'context', 32_768)),
      ...(share !== undefined ? { sharePrefill: share === 'on' } : {}),
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
        emulate: emulate.data,
        port,
        host: values.host ?? '127.0.0.1',
        tasks,
        ...(values.model ? { models: values.model } : {}),
        ...options,
        script: script.data,
        faults,
      });
    } catch (err) {
      throw new CliError(`cannot start: ${(err as Error).message}`);
    }
    process.stdout.write(
      `${JSON.stringify({ url: emulator.url, emulate: emulate.data, tasks: tasks.length })}\n`,
    );
    process.stderr.write(
      `vtnode model-server: emulating ${emulate.data} on ${emulator.url} (${tasks.length} tasks); a test server, not a model\n`,
    );
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await emulator.close();
    return 0;
  },
};
