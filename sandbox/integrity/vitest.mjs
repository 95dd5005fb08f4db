// vitest's integrity harness. The box's entry module (written by the scorer) imports the workspace's own
// `vitest` and calls installVitest() before the judged test file's other imports run, i.e. before the
// candidate loads; the sentinel test appended to the file calls the returned sentinel().
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { bindingWrites, freezeChannels, hardenIntrinsics, pristine } from './harden.cjs';
import {
  asymmetricIn,
  changedNames,
  createRecorder,
  expectCanaries,
  mustFail,
  mutationState,
  nameDigest,
  SENTINEL_NAME,
  snapshot,
  takeSealer,
  trustedRoots,
} from './record.cjs';

// Taken when this module loads, before any candidate: only this module's sentinels are sealed.
const reportSentinel = takeSealer();
/** The `vitest` module the first install was given: every later file of this process must pass the same. */
let runnerModule = null;

const load = createRequire(import.meta.url);

const JEST_MATCHERS = Symbol.for('$$jest-matchers-object');
const ASYMMETRIC = Symbol.for('asymmetric-matchers-object');
const GLOBAL_EXPECT = Symbol.for('expect-global');
/** Properties of a test or suite whose change alters what the report says. */
const TASK_KEYS = ['mode', 'fails', 'retry', 'repeats', 'timeout', 'concurrent', 'shuffle', 'result'];
const RESULT_KEYS = ['state', 'errors', 'pending'];
/** Most failed tests the sentinel names (by digest): its report stays one line of bounded length. */
const MAX_FAILED_NAMES = 2000;

/** The matcher tables expect() reads: one snapshot each, keyed by a stable label. */
function matcherTables(v) {
  const jest = globalThis[JEST_MATCHERS];
  const tables = {
    matchers: jest?.matchers,
    assertion: pristine.getPrototypeOf(v.expect(0)),
    expect: v.expect,
    asymmetric: globalThis[ASYMMETRIC],
  };
  if (v.chai?.Assertion) tables.chaiAssertion = v.chai.Assertion.prototype;
  return Object.entries(tables).filter(([, t]) => t && (typeof t === 'object' || typeof t === 'function'));
}

function testers() {
  return globalThis[JEST_MATCHERS]?.customEqualityTesters ?? [];
}

/** Locks the global bindings expect() reads its state through. */
function lockGlobals() {
  for (const sym of [JEST_MATCHERS, ASYMMETRIC, GLOBAL_EXPECT]) {
    const d = pristine.getOwnPropertyDescriptor(globalThis, sym);
    // A full descriptor: a vm context's global (vitest's vm pools) redefines what a partial one omits.
    if (d?.configurable) pristine.defineProperty(globalThis, sym, { ...d, configurable: false });
  }
}

/**
 * Freezes the existing entries of the matcher tables: replacing a matcher then throws. New names stay
 * possible (chai stores flags on the objects it builds); the sentinel reports them as run changes.
 */
function freezeTables(tables) {
  for (const [, t] of tables) {
    for (const key of pristine.ownKeys(t)) {
      const d = pristine.getOwnPropertyDescriptor(t, key);
      if (!d?.configurable) continue;
      pristine.defineProperty(
        t,
        key,
        'value' in d ? { writable: false, configurable: false } : { configurable: false },
      );
    }
  }
  Object.freeze(testers());
}

async function canaries(v) {
  const c = await expectCanaries(v.expect);
  if (v.assert) c.assert = await mustFail(() => v.assert.equal(1, 2));
  return c;
}

/**
 * The folders of the runner's installed packages (vitest and @vitest/runner, which write the tasks'
 * state), resolved from the run's folder as node resolves them.
 */
function runnerDirs() {
  const out = [];
  try {
    const vitestJson = createRequire(join(process.cwd(), 'index.js')).resolve('vitest/package.json');
    out.push(dirname(vitestJson));
    out.push(dirname(createRequire(vitestJson).resolve('@vitest/runner/package.json')));
  } catch {
    // Not resolvable: no folder is trusted, and every write to the tasks' state is a violation.
  }
  return out;
}

/**
 * What the test process saw of the file's tests, for the host to hold the report to: how many passed,
 * how many had not finished, and a digest of each failed test's name (its report name: the suites'
 * names and its own joined with " > ").
 */
function outcomes(fileSuite) {
  const out = { passed: 0, pending: 0, failed: 0, failedNames: [] };
  const visit = (task, path) => {
    if (task.type === 'suite') {
      for (const t of task.tasks ?? []) visit(t, task === fileSuite ? [] : [...path, task.name]);
      return;
    }
    if (task.name === SENTINEL_NAME && path.length === 0) return;
    const state = task.result?.state;
    if (state === 'pass') out.passed++;
    else if (state === 'fail') {
      out.failed++;
      if (out.failedNames.length < MAX_FAILED_NAMES)
        out.failedNames.push(nameDigest([...path, task.name].join(' > ')));
    } else if (task.mode === 'run' || task.mode === 'queued' || state === 'run' || state === 'queued')
      out.pending++;
  };
  if (fileSuite) visit(fileSuite, []);
  return out;
}

/**
 * Makes every matcher of the Assertion prototype refuse a received value that answers as an asymmetric
 * matcher (record.cjs asymmetricIn): the assertion fails and the sentinel reports a violation.
 */
function guardReceived(v, recorder) {
  const proto = pristine.getPrototypeOf(v.expect(0));
  const flag = v.chai?.util?.flag;
  if (!proto || typeof flag !== 'function') return;
  for (const key of pristine.ownKeys(proto)) {
    const d = pristine.getOwnPropertyDescriptor(proto, key);
    if (!d?.configurable || typeof d.value !== 'function' || key === 'constructor') continue;
    const matcher = d.value;
    const name = String(key);
    const guarded = {
      [name](...args) {
        const at = asymmetricIn(flag(this, 'object'));
        if (at !== null) {
          recorder.violation(`a received value answers as an asymmetric matcher (${at}, .${name})`);
          throw new pristine.errorCtor(`vtnode: the received value carries asymmetricMatch at ${at}`);
        }
        return pristine.apply(matcher, this, args);
      },
    }[name];
    pristine.defineProperty(proto, key, { ...d, value: guarded });
  }
}

/**
 * Freezes the RPC of the worker's state (the birpc client every task update goes through). The global
 * binding of the state stays replaceable (vitest redefines it for each file): a state of the candidate's
 * making is what the sentinel's outcomes and seal catch.
 */
function freezeWorkerRpc() {
  const state = globalThis.__vitest_worker__;
  if (!state || typeof state !== 'object') return;
  const d = pristine.getOwnPropertyDescriptor(state, 'rpc');
  if (d?.configurable && 'value' in d)
    pristine.defineProperty(state, 'rpc', {
      value: d.value,
      writable: false,
      enumerable: d.enumerable,
      configurable: false,
    });
}

/** Watches every test and suite of the file (and each result the runner assigns) for foreign writes. */
function watchTasks(recorder, suite) {
  const watchResult = (r) => {
    if (r && typeof r === 'object') recorder.watch(r, RESULT_KEYS, 'task.result');
  };
  const visit = (task) => {
    recorder.watch(task, TASK_KEYS, `task(${task.name})`, (value) => {
      watchResult(value);
      return value;
    });
    if (Array.isArray(task.tasks)) {
      for (const t of task.tasks) visit(t);
      Object.freeze(task.tasks);
    }
  };
  visit(suite);
}

/**
 * Installs the harness for one test file. `v` is the workspace's `vitest` module namespace; `box` the
 * box's path (code inside it may not write the runner's state).
 */
export function installVitest(v, { box }) {
  runnerModule ??= v;
  // A second caller with another object (the candidate, with a runner of its making) gets nothing sealed.
  if (v !== runnerModule || typeof reportSentinel !== 'function')
    throw new pristine.errorCtor('vtnode: the integrity harness was installed twice');
  hardenIntrinsics();
  freezeChannels(process, load);
  freezeWorkerRpc();
  lockGlobals();
  const readGlobals = bindingWrites();
  const recorder = createRecorder({ box, roots: trustedRoots(runnerDirs(), box) });
  guardReceived(v, recorder);
  const tables = matcherTables(v);
  const before = tables.map(([name, t]) => [name, snapshot(t)]);
  const testersBefore = testers().length;
  /** Finds the file suite among a beforeAll hook's arguments, keeps it in `file` and watches its tasks. */
  const capture = (file, args) => {
    const suite = [...args].find((a) => a && typeof a === 'object' && Array.isArray(a.tasks));
    file.suite = suite ?? null;
    if (suite) watchTasks(recorder, suite);
    else recorder.violation('the file suite was not found by the harness');
  };
  // Registered before the test file's other imports run: this is the file suite's first hook.
  // vitest ≤ 3 passes the suite first; vitest 4 passes a fixture context first and the suite second
  // (and parses the first parameter's source), so the hook reads `arguments`.
  const firstFile = { suite: null };
  v.beforeAll(function watchFile() {
    // biome-ignore lint/complexity/noArguments: vitest rejects a first parameter that is not a destructuring pattern.
    capture(firstFile, arguments);
  });

  const changes = () =>
    before.flatMap(([name, snap], i) => changedNames(snap, tables[i][1]).map((k) => `${name}.${k}`));
  let importChanges = null;
  let importTesters = 0;
  let files = 0;

  function sentinel() {
    // With one module registry for several files (`--isolate=false`), this module is installed once and
    // each later file registers its own hook here, at its end.
    const file = files++ === 0 ? firstFile : { suite: null };
    if (file !== firstFile)
      v.beforeAll(function watchFile() {
        // biome-ignore lint/complexity/noArguments: as above.
        capture(file, arguments);
      });
    // Runs when the file's top-level code is done: what its imports changed is recorded, then frozen.
    importChanges = changes();
    importTesters = testers().length - testersBefore;
    freezeTables(tables);
    v.it(SENTINEL_NAME, async () => {
      const state = {
        v: 1,
        runner: 'vitest',
        canaries: await canaries(v),
        importChanges,
        runChanges: changes().filter((c) => !importChanges.includes(c)),
        testers: importTesters,
        testersAfter: testers().length - testersBefore,
        violations: recorder.violations,
        globals: readGlobals?.() ?? [],
        mutation: mutationState(),
        outcomes: outcomes(file.suite),
      };
      reportSentinel(state, file.suite?.filepath ?? '');
    });
  }
  return { sentinel };
}
