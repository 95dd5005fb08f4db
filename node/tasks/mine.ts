import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join, posix, resolve as resolvePath } from 'node:path';
import { fingerprint, sha256Hex } from '../../protocol/canonical.ts';
import { parseWith } from '../../protocol/parse.ts';
import { type JudgeSpec, Task } from '../../protocol/task.ts';
import { VTNODE_VERSION } from '../../protocol/version.ts';
import { enumerateMutants } from '../../sandbox/mutation/mutants.ts';
import { describeReadiness } from '../../sandbox/workspace-ready.ts';
import { logger } from '../logger.ts';
import { workspaceIdentity } from '../workspace/content-id.ts';
import { analyse } from './analyse.ts';
import { findDeniedTerm } from './deny.ts';
import { isCodeFile, listWorkspaceFiles } from './files.ts';
import { buildGraph } from './graph.ts';
import { judgeCwdFor, mineReadiness } from './install-check.ts';
import { checkLeakage, type Leak } from './leakage.ts';
import { mapLimit } from './limit.ts';
import { pairedSource } from './modules.ts';
import { mustDeclareMap, sortNames } from './must-declare.ts';
import { isParseFailure, type ParsedFile, parseFile } from './parse.ts';
import { declaredDependencies, readProject, tsconfigFor } from './project.ts';
import { type ContextFile, filePrompt, moduleSystemOf, packContext, testsPrompt } from './prompt.ts';
import { createResolver } from './resolve.ts';
import { scriptEnv } from './runner-common.ts';
import { detectRunner, inTestDir, looksLikeTest } from './runners.ts';
import { ensureEvalTasks, type Group, holdOutByShare, splitGroups, splitWarnings } from './split.ts';

/** Version of the miner recorded on every task: bump when prompts or judge specs change. */
export const MINER_VERSION = `${VTNODE_VERSION}+mine.2`;

/** Files larger than this are generated or vendored: never mined. */
const MAX_FILE_BYTES = 1024 * 1024;

export type TaskKind = 'file' | 'tests';

export interface MineOptions {
  /** Repository (or package) to mine. */
  root: string;
  /** Task kinds to produce; both by default. */
  kinds?: readonly TaskKind[];
  /** Fraction of groups (by stable hash) held out for eval; 0.1 by default. */
  evalFraction?: number;
  /**
   * Hold out whole groups, in stable hash order, until this share of the TASKS is in eval (for
   * repositories with too few groups for a fraction of groups); replaces evalFraction when set.
   */
  evalShare?: number;
  /** Modules whose whole group is held out for eval. */
  evalModules?: readonly string[];
  /** Characters of context (file text) per prompt; 60,000 by default. */
  maxContext?: number;
  /** Confidential terms: a file containing any of them is never mined (case-insensitive). */
  denyTerms?: readonly string[];
  /** Also mine shared helpers that most modules import. */
  includeShared?: boolean;
  /** Wall-clock limit of one judge run; by default 30 s plus 10 s per test file, at most 5 minutes. */
  testTimeoutMs?: number;
  /**
   * Refuse (MineError) when the judges could not run in the workspace as installed: runner or
   * dependencies not installed, workspace packages the tests import not built. True by default; turn
   * off to mine a checkout that another machine installs and scores.
   */
  installCheck?: boolean;
  /** Aborts mining between files. */
  signal?: AbortSignal;
  /** Called as files are read and tasks are built (for a progress bar). */
  onProgress?: (progress: { phase: 'read' | 'tasks'; done: number; total: number }) => void;
}

/** A file that gave no task, and why. */
export interface SkippedFile {
  path: string;
  reason: string;
}

/** What `vtnode mine --json` prints. */
export interface MineSummary {
  root: string;
  runner: string;
  /** Why that runner was chosen. */
  runnerEvidence: string;
  /** Where the runner's choice of test files comes from (its config file, its defaults). */
  testSelection: string;
  workspace: { id: string; commit: string | null; clean: boolean };
  minerVersion: string;
  /** Number of tasks. */
  tasks: number;
  byKind: Record<TaskKind, number>;
  bySplit: Record<'train' | 'eval', number>;
  /** Tasks per module, with the module's group and split. */
  byModule: Record<string, { file: number; tests: number; group: string; split: 'train' | 'eval' }>;
  groups: (Group & { tasks: number })[];
  skipped: SkippedFile[];
  /** Eval tasks whose target text appears in some train prompt: must be 0. */
  leakage: number;
  leaks: Leak[];
  /** Tasks whose judge runs timer-based tests (judge.flaky). */
  flaky: number;
  /** Tasks without a type-check command (no tsconfig covering target and tests). */
  withoutTypecheck: number;
  files: { code: number; sources: number; tests: number; typeTests: number; support: number };
  durationMs: number;
  /** Milliseconds per phase: identity, discover, read, graph, install-check, tasks, leakage. */
  timings: Record<string, number>;
  /** Problems that do not stop mining (an empty eval split, ...): the CLI prints them on stderr. */
  warnings: string[];
}

export interface MineResult {
  tasks: Task[];
  summary: MineSummary;
}

/** A problem with the repository or the options: mining cannot start. */
export class MineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MineError';
  }
}

const log = logger('vtnode:mine');

const TEST_CASE = /\b(it|test|specify)(\.(only|skip|each|concurrent|todo|fails)\b[^(]*)?\s*\(/;

/** Mines tasks from the repository at `options.root`. */
export async function mine(options: MineOptions): Promise<MineResult> {
  const started = performance.now();
  const root = resolvePath(options.root);
  const kinds = new Set<TaskKind>(options.kinds ?? ['file', 'tests']);
  const evalFraction = options.evalFraction ?? 0.1;
  const maxContext = options.maxContext ?? 60_000;
  if (!(evalFraction >= 0 && evalFraction <= 1))
    throw new MineError(`eval fraction must be in [0, 1], got ${evalFraction}`);
  const evalShare = options.evalShare ?? null;
  if (evalShare !== null && !(evalShare > 0 && evalShare < 1))
    throw new MineError(`eval share must be in (0, 1), got ${evalShare}`);
  if (!Number.isInteger(maxContext) || maxContext < 0)
    throw new MineError(`max context must be a non-negative integer`);
  const info = await stat(root).catch(() => null);
  if (!info?.isDirectory()) throw new MineError(`root ${root} is not a directory`);

  const timings: Record<string, number> = {};
  let lapStart = performance.now();
  const lap = (phase: string) => {
    const now = performance.now();
    timings[phase] = Math.round(now - lapStart);
    lapStart = now;
  };
  const identity = await workspaceIdentity(root);
  lap('identity');
  if (!identity.clean)
    log.warn(
      identity.commit === null
        ? `${root} is not a git tree: tasks record workspace.clean=false and minedAt "uncommitted"`
        : `${root} has uncommitted changes: tasks record workspace.clean=false (mine a clean checkout for a reproducible reference)`,
    );
  const project = readProject(root, await listWorkspaceFiles(root));
  lap('discover');
  const skipped: SkippedFile[] = project.foreign.map((d) => ({
    path: `${d}/`,
    reason: 'separate package (own package.json, not a workspace member): mine it with its own --root',
  }));

  // Read and parse every code file.
  const fixtureDir = (p: string) => /(^|\/)(__fixtures__|(test|tests|__tests__)\/fixtures)\//.exec(p);
  const fixtureDirs = new Set<string>();
  const codeFiles = project.files.filter((f) => {
    if (!isCodeFile(f)) return false;
    const m = fixtureDir(f);
    if (m) fixtureDirs.add(f.slice(0, m.index + m[0].length));
    return !m;
  });
  for (const d of [...fixtureDirs].sort()) skipped.push({ path: d, reason: 'test fixtures' });
  const parsed = new Map<string, ParsedFile>();
  const terms = (options.denyTerms ?? []).map((t) => t.trim()).filter(Boolean);
  // Read with bounded concurrency (I/O bound), then parse in path order (CPU bound, deterministic).
  let done = 0;
  const texts = await mapLimit(codeFiles, 32, async (path) => {
    options.signal?.throwIfAborted();
    const full = join(root, path);
    const size = (await stat(full)).size;
    const text = size > MAX_FILE_BYTES ? null : await readFile(full, 'utf8');
    options.onProgress?.({ phase: 'read', done: ++done, total: codeFiles.length });
    return text;
  });
  codeFiles.forEach((path, i) => {
    const text = texts[i];
    if (text === null || text === undefined) {
      skipped.push({ path, reason: `larger than ${MAX_FILE_BYTES} bytes (generated or vendored?)` });
      return;
    }
    const denied = findDeniedTerm(text, terms);
    if (denied !== null) {
      skipped.push({ path, reason: `contains a denied term (#${denied + 1} of --deny-terms)` });
      return;
    }
    const result = parseFile(path, text);
    if (isParseFailure(result)) {
      skipped.push({ path, reason: `unparsable: ${result.error}` });
      return;
    }
    parsed.set(path, result);
  });
  options.onProgress?.({ phase: 'read', done: codeFiles.length, total: codeFiles.length });

  lap('read');
  const candidates = [...parsed.values()].filter((f) => looksLikeTest(f.path) || inTestDir(f.path));
  if (candidates.length === 0)
    throw new MineError(
      `no test files under ${root}: looked for *.test.* / *.spec.* files and test folders (${codeFiles.length} code files scanned). Only modules with tests can be mined.`,
    );
  const detected = detectRunner(project, candidates);
  if ('error' in detected) throw new MineError(`${root}: ${detected.error}`);
  const runner = detected.runner;
  const selection = runner.testFiles(project);
  if (selection.unsupported) throw new MineError(`${root}: ${selection.unsupported}`);

  const graph = buildGraph(parsed, createResolver(project));
  lap('graph');
  const warnings: string[] = [];
  const testSide = [...parsed.values()].filter((f) => looksLikeTest(f.path) || inTestDir(f.path));
  const readiness = mineReadiness(project, runner.name, testSide);
  if (!readiness.ok) {
    if (options.installCheck ?? true) throw new MineError(describeReadiness(root, readiness));
    warnings.push(`install check skipped: ${describeReadiness(root, readiness)}`);
  }
  lap('install-check');
  const {
    kindOf,
    sources,
    tests,
    typeTests,
    support,
    exercised,
    testsOf,
    typeTestsOf,
    moduleOfFile,
    moduleFiles,
    sourceModules,
    shared,
    links,
  } = analyse(project, parsed, selection, graph);
  if (tests.length === 0)
    throw new MineError(
      `no ${runner.name} test files under ${root} (${candidates.length} test-like files found, none a ${runner.name} test)`,
    );

  // Groups and split.
  const evalModules = new Set(options.evalModules ?? []);
  const allModules = new Set([
    ...sourceModules,
    ...[...tests, ...typeTests].map((t) => moduleOfFile.get(t)!),
  ]);
  const unknown = [...evalModules].filter((m) => !allModules.has(m));
  if (unknown.length > 0)
    throw new MineError(
      `--eval-modules names unknown module(s): ${unknown.join(', ')}; modules: ${[...allModules].sort().join(', ')}`,
    );
  // With --eval-share, groups are held out by task share once tasks are known (see holdOutByShare).
  let groups = splitGroups(allModules, links, evalShare !== null ? 0 : evalFraction, evalModules);
  const groupOf = (file: string) => groups.get(moduleOfFile.get(file)!)!;

  // Judge helpers.
  const tscAvailable =
    declaredDependencies(project).has('typescript') || existsSync(join(root, 'node_modules/.bin/tsc'));
  const typecheck = (target: string, files: string[]): string[] | null => {
    const cfg = tsconfigFor(project, target);
    if (!cfg || !tscAvailable) return null;
    return [target, ...files].every((f) => cfg.covers.has(f)) ? ['tsc', '--noEmit', '-p', cfg.path] : null;
  };
  const timeout = (n: number) => options.testTimeoutMs ?? Math.min(300_000, 30_000 + 10_000 * n);
  // Variables the test script sets (TZ, BABEL_ENV, …) change verdicts: the judge sets them too.
  const testEnv = scriptEnv(project.rootPackage?.scripts?.['test'] ?? '');
  const judge = (target: string, testFiles: string[], types: string[]): JudgeSpec => {
    const spec: JudgeSpec = {
      runner: runner.name,
      testFiles,
      timeoutMs: timeout(testFiles.length),
      typecheck: typecheck(target, [...testFiles, ...types]),
      flaky: testFiles.some((t) => parsed.get(t)!.usesTimers),
    };
    const cwd = judgeCwdFor(project, runner.name, testFiles);
    if (cwd !== undefined) spec.cwd = cwd;
    if (Object.keys(testEnv).length > 0) spec.env = testEnv;
    if (types.length > 0) spec.typeTests = types;
    return spec;
  };
  const asContext = (path: string, role: string): ContextFile => ({
    path,
    role,
    text: parsed.get(path)!.text,
  });

  const minedAt = identity.commit ?? 'uncommitted';
  const workspace = { id: identity.id, commit: identity.commit, clean: identity.clean, root };
  const tasks: Task[] = [];
  const makeTask = (
    kind: TaskKind,
    target: string,
    module: string,
    messages: Task['messages'],
    spec: JudgeSpec,
    mustDeclare: string[],
  ) => {
    const group = groups.get(module)!;
    const readable = `${kind}:${target}@${identity.id.slice(7, 19)}`;
    const id =
      readable.length <= 200
        ? readable
        : `${kind}:${sha256Hex(`${identity.id}\0${kind}\0${target}`).slice(0, 32)}`;
    const task = parseWith(
      Task,
      {
        id,
        kind,
        workspace,
        module,
        group: group.id,
        split: group.split,
        target,
        messages,
        promptFingerprint: fingerprint(messages),
        judge: spec,
        referenceHash: `sha256:${sha256Hex(parsed.get(target)!.text)}`,
        minedAt,
        mustDeclare,
        minerVersion: MINER_VERSION,
      },
      `task ${id}`,
    );
    tasks.push(task);
  };

  const mustMap = kinds.has('file') ? mustDeclareMap(graph) : new Map<string, Set<string>>();
  const totalSteps = (kinds.has('file') ? sources.length : 0) + (kinds.has('tests') ? tests.length : 0);
  let step = 0;
  const tick = () => options.onProgress?.({ phase: 'tasks', done: ++step, total: totalSteps });

  if (kinds.has('file')) {
    for (const target of sources) {
      options.signal?.throwIfAborted();
      tick();
      const file = parsed.get(target)!;
      const testFiles = testsOf.get(target) ?? [];
      const types = typeTestsOf.get(target) ?? [];
      let reason: string | null = null;
      if (file.barrel) reason = 'barrel: only re-exports other files';
      else if (testFiles.length === 0)
        reason =
          types.length > 0
            ? 'only type tests (*.test-d.ts) exercise it: no executable test'
            : 'no test exercises it';
      else if (file.text.trim() === '') reason = 'empty file';
      else if (shared.has(target) && !options.includeShared)
        reason = `shared helper: imported by ${shared.get(target)} of ${sourceModules.size} modules (--include-shared mines it)`;
      if (reason) {
        skipped.push({ path: target, reason });
        continue;
      }
      const module = moduleOfFile.get(target)!;
      const group = groupOf(target);
      const inGroup = (p: string) => group.modules.includes(moduleOfFile.get(p) ?? '');
      const mustDeclare = sortNames(mustMap.get(target) ?? []);

      // Context: importers of the target first, then the rest of the module, then what it uses in its group.
      const importers = [
        ...new Set(
          graph
            .into(target)
            .map((e) => e.from)
            .filter((f) => kindOf.get(f) === 'source' && !parsed.get(f)!.barrel && inGroup(f)),
        ),
      ].sort(
        (a, b) =>
          Number(moduleOfFile.get(b) === module) - Number(moduleOfFile.get(a) === module) || (a < b ? -1 : 1),
      );
      const taken = new Set([target, ...importers]);
      const rest = (moduleFiles.get(module) ?? [])
        .filter((f) => !taken.has(f))
        .sort((a, b) => parsed.get(a)!.text.length - parsed.get(b)!.text.length || (a < b ? -1 : 1));
      for (const f of rest) taken.add(f);
      const allUses = [
        ...new Set(
          graph
            .out(target)
            .map((e) => e.to)
            .filter((f) => kindOf.get(f) === 'source' && !taken.has(f)),
        ),
      ].sort();
      // Only files of the target's own group are shown in full: anything else could be another split's answer.
      const uses = allUses.filter(inGroup);
      const context = packContext(
        [
          ...importers.map((f) => asContext(f, 'imports the target')),
          ...rest.map((f) => asContext(f, 'same module')),
          ...uses.map((f) => asContext(f, 'used by the target')),
        ],
        maxContext,
      );
      const declared = (moduleFiles.get(module) ?? [])
        .filter((f) => f !== target)
        .map((f) => ({ path: f, names: parsed.get(f)!.declarations }));
      const shownPaths = new Set(context.shown.map((f) => f.path));
      const available = allUses
        .filter((f) => !shownPaths.has(f))
        .map((f) => ({ path: f, names: parsed.get(f)!.exports }));
      const messages = filePrompt({
        target,
        moduleSystem: moduleSystemOf(target, file.text),
        module,
        mustDeclare,
        context,
        declared,
        available,
        testFiles,
      });
      makeTask('file', target, module, messages, judge(target, testFiles, types), mustDeclare);
    }
  }

  const mutable = new Map<string, boolean>();
  /** Whether a source has code a mutant can change (a barrel of wrapper calls has none to kill). */
  const hasMutants = (s: string): boolean => {
    const known = mutable.get(s);
    if (known !== undefined) return known;
    const m = enumerateMutants(parsed.get(s)!.text, s).length > 0;
    mutable.set(s, m);
    return m;
  };
  /**
   * The sources a test file is about, whose mutants judge a `tests` candidate: the source it is named for
   * and the sources beside it, else those of its own module; never shared helpers it only uses to build
   * inputs (mutating those measures the helper, not the test). At most three.
   */
  const underTest = (test: string, subjects: readonly string[], pairedTo: string | null): string[] => {
    const direct = subjects.filter(hasMutants);
    const paired = pairedTo && hasMutants(pairedTo) ? pairedTo : null;
    const own = direct.filter((s) => !shared.has(s));
    const beside = own.filter((s) => posix.dirname(s) === posix.dirname(test));
    const sameModule = own.filter((s) => moduleOfFile.get(s) === moduleOfFile.get(test));
    const picked = paired
      ? [paired, ...beside]
      : beside.length > 0
        ? beside
        : sameModule.length > 0
          ? sameModule
          : own;
    return [...new Set(picked.length > 0 ? picked : direct)].slice(0, 3);
  };

  if (kinds.has('tests')) {
    for (const target of tests) {
      options.signal?.throwIfAborted();
      tick();
      const file = parsed.get(target)!;
      const subjects = exercised(target);
      let reason: string | null = null;
      if (subjects.length === 0) reason = 'imports no source file of the workspace';
      else if (!TEST_CASE.test(file.text)) reason = 'declares no test case';
      else if (runner.name === 'mocha')
        reason =
          "tests tasks are judged by the mutants their tests kill, and mocha's one module cache for every file does not allow the batched mutation run yet";
      if (reason) {
        skipped.push({ path: target, reason });
        continue;
      }
      const module = moduleOfFile.get(target)!;
      const direct = graph.out(target).filter((e) => kindOf.get(e.to) === 'source');
      const specifierOf = (s: string) =>
        (direct.find((e) => e.to === s) ?? direct.find((e) => graph.touched(e.to, e.ref.names).has(s)))?.ref
          .specifier ?? s;
      // The source the test is named for first, then sources beside it, then the rest in import order.
      const paired = pairedSource(target, subjects);
      const order = (s: string) => {
        if (s === paired) return -2;
        if (posix.dirname(s) === posix.dirname(target)) return -1;
        const i = direct.findIndex((e) => e.to === s);
        return i === -1 ? direct.length : i;
      };
      const shown = subjects
        .filter((s) => !parsed.get(s)!.barrel)
        .sort((a, b) => order(a) - order(b) || (a < b ? -1 : 1));
      const helpers = graph
        .out(target)
        .map((e) => e.to)
        .filter((f) => kindOf.get(f) === 'support');
      const context = packContext(
        [
          ...shown.map((s) => asContext(s, 'under test')),
          ...[...new Set(helpers)].map((h) => asContext(h, 'test helper the original imports')),
        ],
        maxContext,
      );
      const inContext = new Set(context.shown.map((f) => f.path));
      const available = [
        ...new Set(
          shown.flatMap((s) =>
            graph
              .out(s)
              .map((e) => e.to)
              .filter((f) => kindOf.get(f) === 'source' && !inContext.has(f) && !parsed.get(f)!.barrel),
          ),
        ),
      ]
        .sort()
        .map((f) => ({ path: f, names: parsed.get(f)!.exports }));
      const messages = testsPrompt({
        target,
        moduleSystem: moduleSystemOf(target, file.text),
        module,
        testStyle: runner.testStyle(file),
        subjects: shown.map((s) => ({ path: s, specifier: specifierOf(s), exports: parsed.get(s)!.exports })),
        context,
        available,
      });
      const spec = judge(target, [target], []);
      spec.typecheck = typecheck(target, subjects);
      spec.mutate = underTest(target, shown, paired);
      if (spec.mutate.length === 0) {
        skipped.push({ path: target, reason: 'the sources it exercises have no code a mutant could change' });
        continue;
      }
      makeTask('tests', target, module, messages, spec, []);
    }
  }

  // The split by task share (--eval-share), or the fraction-of-groups split made sure to hold out tasks.
  const tasksOf = new Map<string, number>();
  for (const t of tasks) tasksOf.set(t.group, (tasksOf.get(t.group) ?? 0) + 1);
  groups =
    evalShare !== null
      ? holdOutByShare(groups, tasksOf, evalShare)
      : ensureEvalTasks(groups, tasksOf, evalFraction);
  for (const t of tasks) t.split = groups.get(t.module)!.split;
  lap('tasks');
  const leaks = checkLeakage(tasks, (t) => parsed.get(t.target)!.text);
  lap('leakage');
  const summary: MineSummary = {
    root,
    runner: runner.name,
    runnerEvidence: detected.evidence,
    testSelection: selection.source,
    workspace: { id: identity.id, commit: identity.commit, clean: identity.clean },
    minerVersion: MINER_VERSION,
    tasks: tasks.length,
    byKind: { file: 0, tests: 0 },
    bySplit: { train: 0, eval: 0 },
    byModule: {},
    groups: [],
    skipped,
    leakage: new Set(leaks.map((l) => l.evalTask)).size,
    leaks,
    flaky: tasks.filter((t) => t.judge.flaky).length,
    withoutTypecheck: tasks.filter((t) => t.judge.typecheck === null).length,
    files: {
      code: codeFiles.length,
      sources: sources.length,
      tests: tests.length,
      typeTests: typeTests.length,
      support: support.length,
    },
    durationMs: 0,
    timings,
    warnings,
  };
  const groupTasks = new Map<string, number>();
  for (const t of tasks) {
    summary.byKind[t.kind]++;
    summary.bySplit[t.split]++;
    const g = groups.get(t.module)!;
    const row = summary.byModule[t.module] ?? { file: 0, tests: 0, group: g.id, split: g.split };
    summary.byModule[t.module] = row;
    row[t.kind]++;
    groupTasks.set(g.id, (groupTasks.get(g.id) ?? 0) + 1);
  }
  summary.groups = [...new Map([...groups.values()].map((g) => [g.id, g])).values()].map((g) => ({
    ...g,
    tasks: groupTasks.get(g.id) ?? 0,
  }));
  summary.warnings.push(
    ...splitWarnings(summary.bySplit, summary.groups.length, { evalFraction, evalShare }),
  );
  summary.durationMs = Math.round(performance.now() - started);
  return { tasks, summary };
}
