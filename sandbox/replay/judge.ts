import { readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { stripTypeScriptTypes } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { sha256Hex } from '../../protocol/canonical.ts';
import type { Task } from '../../protocol/task.ts';
import { insideBox } from '../box.ts';
import type { JudgeRun, JudgeRunner } from '../judge-run.ts';
import type { TestCase } from '../judges/verdict.ts';
import {
  compareReplay,
  type Difference,
  type ExpectedCall,
  formatDifference,
  outputKey,
  type ReplayedCall,
} from './compare.ts';
import { isTestPath } from './prune.ts';
import { CallOutput, callName, parseRecording, type RecordedCall, ScriptCall } from './recording.ts';
import {
  fromFile,
  type ImportedModule,
  importedModules,
  importsModule,
  importsPath,
  type PathAliases,
  RUNTIME_DIR,
  readPathAliases,
  realPath,
  recorderWrapper,
  reexports,
  targetExports,
  targetImports,
} from './wrapper.ts';

/**
 * The modules the judged test files import besides the target (box paths, with their text), following
 * re-exports (a barrel's `export * from`) to the modules that define what the tests call.
 */
async function testedModules(
  task: Task,
  workspaceDir: string,
  aliases: PathAliases,
): Promise<{ file: string; text: string }[]> {
  const exists = (rel: string) => {
    try {
      return statSync(insideBox(workspaceDir, rel)).isFile();
    } catch {
      return false;
    }
  };
  const read = (rel: string) => readFile(insideBox(workspaceDir, rel), 'utf8').catch(() => null);
  const found = new Map<string, string>();
  const queue: string[] = [];
  const visit = (from: string, specs: string[]) => {
    for (const m of importedModules(from, task.target, specs, exists, aliases))
      if (m.key !== m.spec && m.key !== task.target && !isTestPath(m.key) && !found.has(m.key)) {
        found.set(m.key, '');
        queue.push(m.key);
      }
  };
  for (const t of task.judge.testFiles) visit(t, targetImports((await read(t)) ?? '', t));
  for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
    const text = (await read(f)) ?? '';
    found.set(f, text);
    visit(f, reexports(text, f));
  }
  return [...found].map(([file, text]) => ({ file, text }));
}

const HERE = fileURLToPath(new URL('.', import.meta.url));
const RUNTIME_FILES = [
  'codec.mjs',
  'determinism.mjs',
  'record.mjs',
  'replay.mjs',
  'node-hooks.mjs',
  'node-main.mjs',
];
const RUNTIME = Object.fromEntries(
  RUNTIME_FILES.map((f) => [f, readFileSync(join(HERE, 'runtime', f), 'utf8')]),
);
/** Content digest of the replay (runtime and host parts): a stored answer key of another digest is recorded again. */
export const REPLAY_DIGEST = `sha256:${sha256Hex(
  [
    ...RUNTIME_FILES.map((f) => RUNTIME[f]!),
    ...['compare.ts', 'recording.ts', 'wrapper.ts', 'judge.ts', 'prune.ts'].map((f) =>
      readFileSync(join(HERE, f), 'utf8'),
    ),
  ].join('\0'),
)}`;

/** One test file of the answer key: the inputs the box gets, and the expected outputs the host keeps. */
const KeyFile = z.object({
  /** Box-relative test file the calls were recorded under. */
  file: z.string(),
  script: z.array(ScriptCall),
  expected: z.array(
    z.object({ i: z.number().int(), test: z.string().nullable(), name: z.string(), output: CallOutput }),
  ),
});

/**
 * Where a task's candidates are replayed: `node`, the box's node alone (types stripped, the workspace's
 * path aliases followed: runtime/node-hooks.mjs), or `vitest`, the workspace's own runner and transform
 * (a generated test file at each judged test file's path). The node mode is a tenth of the cost; it is
 * the task's mode when it reproduces the recording at least as well as vitest does.
 */
export const ReplayMode = z.enum(['node', 'vitest']);
export type ReplayMode = z.infer<typeof ReplayMode>;

/** The answer key of a task's replay, made at calibration from the reference; kept with the reference. */
export const ReplayKey = z.object({
  v: z.literal(1),
  digest: z.string(),
  /** Where candidates are replayed (a difference in the node mode is confirmed under vitest). */
  mode: ReplayMode.default('vitest'),
  /** The workspace's tsconfig `paths` (the node mode follows them). */
  aliases: z.array(z.object({ pattern: z.string(), to: z.array(z.string()) })).default([]),
  /**
   * The box files the node mode's self-replays loaded as TypeScript: the host strips their types for each
   * candidate's run (runtime/node-hooks.mjs), which then never starts the stripper itself.
   */
  strip: z.array(z.string()).default([]),
  /** Whether candidates are replayed (at least one call reproduces itself). */
  replayable: z.boolean(),
  /** Why the task is not replayable, or null. */
  why: z.string().nullable(),
  /** Calls the tests made into the target, and those that replay (the coverage is kept ÷ recorded). */
  recorded: z.number().int().nonnegative(),
  kept: z.number().int().nonnegative(),
  /** A few reasons calls were left out, for people. */
  dropped: z.array(z.string()),
  /** The modules the replay imports: the reference's imports and the modules the tests call besides it. */
  imports: z.array(z.object({ key: z.string(), spec: z.string() })),
  files: z.array(KeyFile),
});
export type ReplayKey = z.infer<typeof ReplayKey>;

/** A candidate's replay, compared on the host. */
export interface ReplayVerdict {
  /** Expected calls compared (those of tests that passed in the candidate's run). */
  compared: number;
  differences: Difference[];
  /** Where the verdict's replay ran (`vitest` also when a node-mode difference was confirmed there). */
  mode: ReplayMode;
}

const ReplayOut = z.object({
  v: z.literal(1),
  calls: z.array(
    z.object({
      i: z.number().int().nonnegative(),
      skipped: z.boolean().optional(),
      unresolved: z.string().optional(),
      out: CallOutput.shape.out.optional(),
      after: CallOutput.shape.after.optional(),
      selfAfter: CallOutput.shape.selfAfter,
      settled: CallOutput.shape.settled,
    }),
  ),
});

const notReplayable = (why: string, recorded = 0): ReplayKey => ({
  v: 1,
  digest: REPLAY_DIGEST,
  mode: 'vitest',
  aliases: [],
  strip: [],
  replayable: false,
  why,
  recorded,
  kept: 0,
  dropped: [],
  imports: [],
  files: [],
});

/** The files both runs need: the runtime modules, and the module importing what the reference imports. */
const runtimeOverlay = (task: Task, imports: ImportedModule[]): Record<string, string> => ({
  ...Object.fromEntries(RUNTIME_FILES.map((f) => [`${RUNTIME_DIR}/${f}`, RUNTIME[f]!])),
  [importsPath(task.target)]: importsModule(imports),
});

/** The generated test file that replays script `n` at a judged test file's path. */
export function replayFile(testFile: string, target: string, n: number): string {
  return [
    '// Written by vtnode: the differential replay of this test file (sandbox/replay/).',
    // The replayer first: it installs the controlled clock and random numbers before the target loads.
    `import { replay as __vtnodeReplay } from ${JSON.stringify(fromFile(testFile, `${RUNTIME_DIR}/replay.mjs`))};`,
    "import { it } from 'vitest';",
    `import * as __vtnodeTarget from ${JSON.stringify(fromFile(testFile, target))};`,
    `import { modules as __vtnodeModules } from ${JSON.stringify(fromFile(testFile, importsPath(target)))};`,
    `it('vtnode replay', async () => { await __vtnodeReplay(${n}, __vtnodeTarget, __vtnodeModules); }, 3_600_000);`,
    '',
  ].join('\n');
}

/** The node mode's command: types stripped by node itself, the resolution hooks preloaded. */
const nodeArgs = (box: string) => [
  '--no-warnings',
  '--experimental-transform-types',
  '--import',
  join(box, RUNTIME_DIR, 'node-hooks.mjs'),
  join(box, RUNTIME_DIR, 'node-main.mjs'),
];

/** Types stripped on the host, by the sha256 of the TypeScript text; null where stripping throws. */
const hostStripped = new Map<string, string | null>();
const HOST_STRIPPED_MAX = 4096;

/** A workspace file's text, or null (absent, unreadable, or a path out of the workspace). */
async function workspaceText(workspaceDir: string, rel: string): Promise<string | null> {
  try {
    return await readFile(insideBox(workspaceDir, rel), 'utf8');
  } catch {
    return null;
  }
}

/**
 * The node mode's pre-stripped sources (sha256 of the TypeScript text → JavaScript) of the box files
 * `paths`, read from the run's overlay or the workspace; never a test file (a replay box holds none). A
 * file the host cannot strip is left to the box, which fails on it the same way.
 */
async function prestripped(
  task: Task,
  workspaceDir: string,
  overlay: Record<string, string>,
  paths: string[],
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const rel of paths) {
    if (isTestPath(rel) || task.judge.testFiles.includes(rel)) continue;
    const text = overlay[rel] ?? (await workspaceText(workspaceDir, rel));
    if (text === null) continue;
    const hash = sha256Hex(text);
    let js = hostStripped.get(hash);
    if (js === undefined) {
      try {
        js = stripTypeScriptTypes(text, { mode: 'transform' });
      } catch {
        js = null;
      }
      if (hostStripped.size >= HOST_STRIPPED_MAX) hostStripped.clear();
      hostStripped.set(hash, js);
    }
    if (js !== null) out[hash] = js;
  }
  return out;
}

/** A replay run's box files and command, per mode (the scripts and the candidate are common). */
function modeRun(
  mode: ReplayMode,
  target: string,
  used: { file: string; n: number }[],
  aliases: PathAliases,
  stripped: Record<string, string>,
): { overlay: Record<string, string>; testFiles?: string[]; nodeArgs?: (box: string) => string[] } {
  if (mode === 'vitest')
    return {
      overlay: Object.fromEntries(used.map((f) => [f.file, replayFile(f.file, target, f.n)])),
      testFiles: used.map((f) => f.file),
    };
  const files = used.map((f) => ({ n: f.n, target, imports: importsPath(target) }));
  return {
    overlay: { [`${RUNTIME_DIR}/node-plan.json`]: JSON.stringify({ aliases, files, stripped }) },
    nodeArgs,
  };
}

/** What a replay run gave back: each call's output per `file\0i`, and the TypeScript files it loaded. */
interface ReplayRunOutput {
  calls: Map<string, ReplayedCall>;
  /** Box files the node mode loaded as TypeScript (empty under vitest). */
  loaded: string[];
}
const LOADED = `${RUNTIME_DIR}/loaded.json`;

const passedSet = (cases: TestCase[]) =>
  new Set(cases.filter((c) => c.status === 'passed').map((c) => `${c.file}\0${c.name}`));

/** One replay run of `candidate` in a box without test files: the outputs per `file\0i`, or infra. */
async function replayRun(
  judges: JudgeRunner,
  task: Task,
  workspaceDir: string,
  candidate: string,
  how: { mode: ReplayMode; aliases: PathAliases; strip: string[] },
  files: { file: string; script: ScriptCall[] }[],
  imports: ImportedModule[],
  signal?: AbortSignal,
): Promise<ReplayRunOutput | { infra: string }> {
  const used = files.map((f, n) => ({ ...f, n })).filter((f) => f.script.length > 0);
  const common: Record<string, string> = {
    ...runtimeOverlay(task, imports),
    [task.target]: candidate,
    ...Object.fromEntries(
      used.map((f) => [`${RUNTIME_DIR}/script-${f.n}.json`, JSON.stringify({ calls: f.script })]),
    ),
  };
  const stripped = how.mode === 'node' ? await prestripped(task, workspaceDir, common, how.strip) : {};
  const { overlay: own, ...command } = modeRun(how.mode, task.target, used, how.aliases, stripped);
  const overlay = { ...common, ...own };
  const run = await judges.run({
    task,
    workspaceDir,
    overlay,
    harness: false,
    pruneTests: true,
    ...command,
    collect: [...used.map((f) => `${RUNTIME_DIR}/out-${f.n}.json`), ...(command.nodeArgs ? [LOADED] : [])],
    ...(signal ? { signal } : {}),
  });
  if (run.infra) return { infra: run.infra };
  return { calls: replayedCalls(used, run), loaded: loadedPaths(run.collected.get(LOADED)) };
}

/** Each call's output (or why it is missing) per `file\0i`, from the outputs a replay run wrote. */
function replayedCalls(
  used: { file: string; n: number; script: ScriptCall[] }[],
  run: JudgeRun,
): Map<string, ReplayedCall> {
  const out = new Map<string, ReplayedCall>();
  for (const f of used) {
    const text = run.collected.get(`${RUNTIME_DIR}/out-${f.n}.json`);
    const parsed = text ? ReplayOut.safeParse(safeJson(text)) : null;
    const why = !text
      ? `the replay of ${f.file} wrote no outputs${run.failure ? ` (${run.failure})` : ''}`
      : parsed?.success
        ? null
        : `the replay outputs of ${f.file} are malformed`;
    if (why || !parsed?.success) {
      for (const c of f.script) out.set(`${f.file}\0${c.i}`, { i: c.i, missing: why ?? 'malformed' });
      continue;
    }
    for (const c of parsed.data.calls) {
      const k = `${f.file}\0${c.i}`;
      if (c.skipped || c.unresolved !== undefined || !c.out || !c.after)
        out.set(k, { i: c.i, missing: c.unresolved ?? 'left out' });
      else
        out.set(k, {
          i: c.i,
          output: {
            out: c.out,
            after: c.after,
            ...(c.selfAfter !== undefined ? { selfAfter: c.selfAfter } : {}),
            ...(c.settled ? { settled: c.settled } : {}),
          },
        });
    }
  }
  return out;
}

export interface ReplayJudgeOptions {
  /** The modes calibration may give a task, cheapest first (default node, then vitest). */
  modes?: ReplayMode[];
}

/** Records, self-replays and replays candidates of `file` tasks (vitest) through a judge runner. */
export function createReplayJudge(judges: JudgeRunner, options: ReplayJudgeOptions = {}) {
  const modes = options.modes ?? ['node', 'vitest'];
  return {
    /**
     * Records the reference under the task's tests and replays it twice; the answer key, or why the task
     * is not replayable (a verdict on the task, kept), or infra (retry). The reference's own run may still
     * be running (the recording runs beside it; its cases are read after).
     */
    async record(
      task: Task,
      workspaceDir: string,
      reference: string,
      referenceRun: JudgeRun | Promise<JudgeRun>,
      signal?: AbortSignal,
    ): Promise<ReplayKey | { infra: string }> {
      if (task.kind !== 'file') return notReplayable('only file tasks are replayed');
      if (task.judge.runner !== 'vitest')
        return notReplayable(`the replay drives vitest only, not ${task.judge.runner}`);
      const exports = targetExports(reference, task.target);
      if (exports.wrapped.length === 0)
        return notReplayable('the target exports no function, class or constant');
      const testFiles = task.judge.testFiles;
      // The modules the tests call besides the target are recorded too: their calls build the objects
      // the tests pass in, so the replay performs them again (and compares only the target's).
      const aliases = readPathAliases(
        await readFile(insideBox(workspaceDir, 'tsconfig.json'), 'utf8').catch(() => null),
      );
      const others = await testedModules(task, workspaceDir, aliases);
      const exists = (rel: string) => rel === task.target || others.some((o) => o.file === rel);
      const own = importedModules(
        task.target,
        task.target,
        targetImports(reference, task.target),
        (rel) => {
          try {
            return exists(rel) || statSync(insideBox(workspaceDir, rel)).isFile();
          } catch {
            return false;
          }
        },
        aliases,
      );
      const imports = dedupe([
        ...own,
        ...others.map((o) => ({ key: o.file, spec: fromFile(task.target, o.file) })),
      ]);
      const overlay: Record<string, string> = {
        ...runtimeOverlay(task, own),
        [realPath(task.target)]: reference,
        [task.target]: recorderWrapper({
          target: task.target,
          owner: '',
          imports: importsPath(task.target),
          exports,
          testFiles,
        }),
      };
      for (const o of others) {
        overlay[realPath(o.file)] = o.text;
        overlay[o.file] = recorderWrapper({
          target: o.file,
          owner: o.file,
          imports: null,
          exports: targetExports(o.text, o.file),
          testFiles,
        });
      }
      const run = await judges.run({
        task,
        workspaceDir,
        overlay,
        harness: false,
        collect: testFiles.map((_, n) => `${RUNTIME_DIR}/rec-${n}.jsonl`),
        ...(signal ? { signal } : {}),
      });
      if (run.infra) return { infra: `the recording run: ${run.infra}` };
      if (!run.verdict)
        return notReplayable(`the recording run gave no verdict: ${run.failure ?? 'unknown'}`);
      const passing = passedSet(run.verdict.cases);
      const lost = ((await referenceRun).verdict?.cases ?? []).filter(
        (c) => c.status === 'passed' && !passing.has(`${c.file}\0${c.name}`),
      );
      if (lost.length > 0)
        return notReplayable(`under the recorder, ${lost.length} test(s) no longer pass: ${lost[0]!.name}`);
      let recorded: { file: string; calls: RecordedCall[] }[];
      try {
        recorded = testFiles.map((file, n) => ({
          file,
          calls: parseRecording(run.collected.get(`${RUNTIME_DIR}/rec-${n}.jsonl`) ?? '', file),
        }));
      } catch (err) {
        return notReplayable(`the recording is malformed: ${(err as Error).message}`);
      }
      const total = recorded.reduce((a, f) => a + f.calls.filter((c) => c.input.m === undefined).length, 0);
      if (total === 0) return notReplayable('the tests made no call into the target that the recorder saw');
      const files = recorded.map((f) => ({ file: f.file, script: f.calls.map((c) => c.input) }));
      /** The answer key of one mode: the calls its two self-replays reproduce exactly. */
      const keyIn = async (mode: ReplayMode): Promise<ReplayKey | { infra: string }> => {
        const how = { mode, aliases, strip: [] };
        const selves = await Promise.all(
          [1, 2].map(() => replayRun(judges, task, workspaceDir, reference, how, files, imports, signal)),
        );
        for (const s of selves)
          if ('infra' in s) return { infra: `the reference's self-replay (${mode}): ${s.infra}` };
        const [a, b] = selves as ReplayRunOutput[];
        // The files both self-replays loaded (the candidate's own imports, when it has others, strip in the box).
        const strip = a!.loaded.filter((f) => b!.loaded.includes(f));
        return { ...answerKey(recorded, a!.calls, b!.calls, total), mode, aliases, strip, imports };
      };
      // The cheapest mode first: once a mode keeps every call that could be kept, none does better.
      let best: ReplayKey | null = null;
      for (const mode of modes) {
        const key = await keyIn(mode);
        if ('infra' in key) return key;
        if (!best || key.kept > best.kept) best = key;
        if (best.kept === keepable(recorded)) break;
      }
      return best ?? notReplayable('no replay mode is enabled', total);
    },

    /** Replays a candidate and compares it, on the host, with the key's calls of the tests that passed. */
    async replay(
      task: Task,
      workspaceDir: string,
      candidate: string,
      key: ReplayKey,
      cases: TestCase[],
      signal?: AbortSignal,
    ): Promise<ReplayVerdict | { infra: string }> {
      const passed = passedSet(cases);
      const fileWithPass = new Set(cases.filter((c) => c.status === 'passed').map((c) => c.file));
      const expected: ExpectedCall[] = key.files.flatMap((f) =>
        f.expected
          .filter((e) => (e.test === null ? fileWithPass.has(f.file) : passed.has(`${f.file}\0${e.test}`)))
          .map((e) => ({ ...e, file: f.file })),
      );
      if (expected.length === 0) return { compared: 0, differences: [], mode: key.mode };
      const compareIn = async (mode: ReplayMode): Promise<ReplayVerdict | { infra: string }> => {
        const how = { mode, aliases: key.aliases, strip: key.strip };
        const actual = await replayRun(
          judges,
          task,
          workspaceDir,
          candidate,
          how,
          key.files,
          key.imports,
          signal,
        );
        if ('infra' in actual) return { infra: `the replay could not run (${mode}): ${actual.infra}` };
        const differences = compareReplay(expected, actual.calls, (f, i) => `${f}\0${i}`);
        return { compared: expected.length, differences, mode };
      };
      const first = await compareIn(key.mode);
      // The node mode is not the environment the tests ran in: a difference there is confirmed under
      // vitest before it costs the candidate anything (an honest rewrite may lean on the runner's setup).
      if (key.mode === 'node' && !('infra' in first) && first.differences.length > 0)
        return await compareIn('vitest');
      return first;
    },
  };
}

/** Calls an answer key could keep: the target's own calls whose inputs the recorder could capture. */
function keepable(recorded: { calls: RecordedCall[] }[]): number {
  return recorded.reduce(
    (a, f) => a + f.calls.filter((c) => c.input.m === undefined && !c.input.skip).length,
    0,
  );
}

function dedupe(modules: ImportedModule[]): ImportedModule[] {
  const seen = new Set<string>();
  return modules.filter((m) => !seen.has(m.key) && seen.add(m.key));
}

/** The box-relative paths a node-mode run says it loaded (loaded.json); none when absent or malformed. */
function loadedPaths(text: string | null | undefined): string[] {
  const parsed = z.array(z.string()).safeParse(text ? safeJson(text) : undefined);
  return parsed.success ? parsed.data : [];
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The answer key: the calls whose recording and two self-replays agree exactly. */
export function answerKey(
  recorded: { file: string; calls: RecordedCall[] }[],
  a: Map<string, ReplayedCall>,
  b: Map<string, ReplayedCall>,
  total: number,
): Omit<ReplayKey, 'imports' | 'mode' | 'aliases' | 'strip'> {
  const dropped = new Map<string, number>();
  const drop = (why: string) => dropped.set(why, (dropped.get(why) ?? 0) + 1);
  let kept = 0;
  const files = recorded.map((f) => {
    const expected: z.infer<typeof KeyFile>['expected'] = [];
    for (const c of f.calls) {
      if (c.input.m !== undefined) continue;
      if (c.input.skip) {
        drop(c.input.skip);
        continue;
      }
      const k = `${f.file}\0${c.input.i}`;
      const ra = a.get(k);
      const rb = b.get(k);
      const want = outputKey(c.output, 'exact');
      if (!ra?.output || !rb?.output)
        drop(`the reference's replay did not perform it (${ra?.missing ?? rb?.missing ?? 'no output'})`);
      else if (outputKey(ra.output, 'exact') !== want || outputKey(rb.output, 'exact') !== want)
        drop(
          outputKey(ra.output, 'exact') === outputKey(rb.output, 'exact')
            ? "the reference's replay differs from its recording (state, time or randomness the replay does not reproduce)"
            : "the reference's two replays differ (it is not deterministic)",
        );
      else {
        kept++;
        expected.push({ i: c.input.i, test: c.test, name: callName(c.input), output: c.output });
      }
    }
    return { file: f.file, script: f.calls.map((c) => c.input), expected };
  });
  const reasons = [...dropped]
    .sort((x, y) => y[1] - x[1])
    .slice(0, 5)
    .map(([why, n]) => `${n}× ${why}`);
  return {
    v: 1,
    digest: REPLAY_DIGEST,
    replayable: kept > 0,
    why: kept > 0 ? null : `no recorded call replays: ${reasons.join('; ')}`,
    recorded: total,
    kept,
    dropped: reasons,
    files,
  };
}

/** The reason a candidate gets when its tests pass but its replay differs. */
export function replayReason(v: ReplayVerdict): string | null {
  if (v.differences.length === 0) return null;
  const first = v.differences.slice(0, 3).map(formatDifference).join(' | ');
  return `tests passed, replay differs on ${v.differences.length} of ${v.compared} calls: ${first}`;
}
