// vitest's integrity harness. The box's entry module (written by the scorer) imports the workspace's own
// `vitest` and calls installVitest() before the judged test file's other imports run, i.e. before the
// candidate loads; the sentinel test appended to the file calls the returned sentinel().
import { bindingWrites, hardenIntrinsics, pristine } from './harden.cjs';
import {
  changedNames,
  createRecorder,
  expectCanaries,
  mustFail,
  mutationState,
  reportSentinel,
  SENTINEL_NAME,
  snapshot,
} from './record.cjs';

const JEST_MATCHERS = Symbol.for('$$jest-matchers-object');
const ASYMMETRIC = Symbol.for('asymmetric-matchers-object');
const GLOBAL_EXPECT = Symbol.for('expect-global');
/** Properties of a test or suite whose change alters what the report says. */
const TASK_KEYS = ['mode', 'fails', 'retry', 'repeats', 'timeout', 'concurrent', 'shuffle', 'result'];
const RESULT_KEYS = ['state', 'errors', 'pending'];

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
  hardenIntrinsics();
  lockGlobals();
  const readGlobals = bindingWrites();
  const recorder = createRecorder({ box });
  const tables = matcherTables(v);
  const before = tables.map(([name, t]) => [name, snapshot(t)]);
  const testersBefore = testers().length;
  // Registered before the test file's other imports run: this is the file suite's first hook.
  // vitest ≤ 3 passes the suite first; vitest 4 passes a fixture context first and the suite second
  // (and parses the first parameter's source), so the hook reads `arguments`.
  v.beforeAll(function watchFile() {
    // biome-ignore lint/complexity/noArguments: vitest rejects a first parameter that is not a destructuring pattern.
    const suite = [...arguments].find((a) => a && typeof a === 'object' && Array.isArray(a.tasks));
    if (suite) watchTasks(recorder, suite);
    else recorder.violation('the file suite was not found by the harness');
  });

  const changes = () =>
    before.flatMap(([name, snap], i) => changedNames(snap, tables[i][1]).map((k) => `${name}.${k}`));
  let importChanges = null;
  let importTesters = 0;

  function sentinel() {
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
      };
      reportSentinel(state);
    });
  }
  return { sentinel };
}
