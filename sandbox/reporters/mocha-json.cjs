'use strict';
// A mocha reporter that writes ONE JSON document with every test case, for vtnode's judge.
// Loaded with `mocha --reporter <this file> --reporter-option output=<report>`.
//
// Mocha runs the test files in THIS process, so anything here can be reached by the code under test.
// What this file does about it (see docs/sandbox.md, "Judges"):
// - the fs functions are bound when mocha loads the reporter, before any test file is loaded, so a
//   test that later patches `fs.writeFileSync` does not change how the report is written;
// - the report is written to a fresh temporary file and renamed over the report path: a file, a
//   symlink or a hard link a test planted there is replaced, never written through;
// - it is written at the run's end and once more from an exit listener added at that moment, i.e.
//   after every exit listener a test file could have added, so a test's own "write a fake report at
//   exit" runs first and is overwritten;
// - a process that exits before the run ends (a test calling process.exit, a crash) leaves a document
//   that says so (`complete: false`), which the judge refuses; a process that exits before the run
//   starts (a test file or a required module failed to load) leaves `started: false` and one error.
const { openSync, writeSync, closeSync, renameSync, unlinkSync } = require('node:fs');
const { basename, dirname, join } = require('node:path');
const { randomBytes } = require('node:crypto');

const FORMAT = 'vtnode-mocha/1';
const MESSAGE_CHARS = 300;
const SENTINEL_CHARS = 64 * 1024;

/** The `output=` reporter option as it appears in argv (for the exit before any reporter exists). */
function outputFromArgv(argv) {
  for (const arg of argv) {
    const at = arg.indexOf('output=');
    if (at !== -1 && (at === 0 || /[=.\s]/.test(arg[at - 1]))) return arg.slice(at + 'output='.length);
  }
  return null;
}

function writeReport(path, doc) {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(tmp, 'wx', 0o644);
  try {
    writeSync(fd, `${JSON.stringify(doc)}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, path);
  } catch (err) {
    unlinkSync(tmp);
    throw err;
  }
}

function firstLine(err) {
  let text;
  if (err instanceof Error) text = err.message;
  else if (err && typeof err === 'object' && 'message' in err) text = String(err.message);
  else text = String(err);
  const line = text.split('\n')[0] || err?.name || 'failed';
  // The integrity sentinel's report line is kept whole; other messages are capped.
  return line.slice(0, line.includes('vtnode-sentinel:') ? SENTINEL_CHARS : MESSAGE_CHARS);
}

const state = { started: false, ended: false, doc: null };
const argvOutput = outputFromArgv(process.argv);

// Registered at load time, before any test file: covers a run that never starts or never ends.
process.on('exit', () => {
  if (state.ended || !argvOutput) return;
  const message = state.started
    ? 'the process exited before the mocha run ended (process.exit in a test, or a crash)'
    : 'mocha stopped before running any test: a test file or a required module failed to load (see stderr)';
  writeReport(argvOutput, {
    format: FORMAT,
    started: state.started,
    complete: false,
    cases: state.doc ? state.doc.cases : [],
    errors: [{ file: '', message }],
  });
});

/** Full title of a test or hook: its suites and its own title (the root suite has no title). */
function titlePath(runnable) {
  return typeof runnable.titlePath === 'function' ? runnable.titlePath() : [runnable.title];
}

/** A short human summary on stderr (the scorer shows its tail to repair prompts). */
function summarise(doc) {
  const n = { passed: 0, failed: 0, skipped: 0 };
  for (const c of doc.cases) n[c.status] = (n[c.status] || 0) + 1;
  const lines = doc.cases.filter((c) => c.status === 'failed').map((c) => `  x ${c.name}: ${c.message}`);
  for (const e of doc.errors) lines.push(`  ! ${e.message}`);
  process.stderr.write(
    `mocha: ${n.passed} passed, ${n.failed} failed, ${n.skipped} skipped\n${lines.join('\n')}\n`,
  );
}

/** The key of a test's outcome: a retried test is a clone, the first attempt stands for all of them. */
function keyOf(test) {
  return (typeof test.retriedTest === 'function' && test.retriedTest()) || test;
}

/** True when a test under `suite` (its own or a nested suite's) failed. */
function anyFailed(suite, outcomes) {
  if (suite.tests.some((test) => outcomes.get(keyOf(test))?.status === 'failed')) return true;
  return suite.suites.some((child) => anyFailed(child, outcomes));
}

/** Records the tests under `suite` that never reported an outcome because its hook failed. */
function failUnrun(runner, suite, message, outcomes) {
  for (const test of suite.tests) {
    if (outcomes.has(keyOf(test)) || !matchesGrep(runner, test)) continue;
    const pending = test.isPending();
    outcomes.set(keyOf(test), {
      file: test.file || '',
      name: titlePath(test).join(' > '),
      status: pending ? 'skipped' : 'failed',
      ...(pending ? {} : { message: `not run: a hook failed: ${message}`.slice(0, MESSAGE_CHARS) }),
    });
  }
  for (const child of suite.suites) failUnrun(runner, child, message, outcomes);
}

/** True unless mocha's --grep/--fgrep (kept from the workspace's config) leaves the test out. */
function matchesGrep(runner, test) {
  const grep = runner._grep;
  if (!(grep instanceof RegExp)) return true;
  return grep.test(test.fullTitle()) !== Boolean(runner._invert);
}

class VtnodeJsonReporter {
  constructor(runner, options) {
    const output = options?.reporterOption?.output;
    if (typeof output !== 'string' || output === '')
      throw new Error('the vtnode mocha reporter needs --reporter-option output=<path>');
    state.started = true;
    /** test (the first attempt, retries share it) -> { file, name, status, message } */
    const outcomes = new Map();
    const errors = [];
    /** Suites whose hook failed: the tests under them that never ran failed with it. */
    const failedHooks = [];
    const record = (test, status, err) => {
      const c = { file: test.file || '', name: titlePath(test).join(' > '), status };
      if (status === 'failed') c.message = firstLine(err);
      outcomes.set(keyOf(test), c);
    };

    runner.on('pass', (test) => {
      const prior = outcomes.get(keyOf(test));
      if (prior?.status !== 'failed') record(test, 'passed');
    });
    // Mocha cannot tell a placeholder (`it('x')`) from `it.skip` (it drops the body): both are skipped.
    runner.on('pending', (test) => record(test, 'skipped'));
    runner.on('fail', (runnable, err) => {
      if (runnable.type === 'test') {
        record(runnable, 'failed', err);
        return;
      }
      // A hook, or mocha's stand-in for an error outside any test.
      const file = runnable.file || runnable.parent?.file || '';
      const error = { file, message: `${runnable.title}: ${firstLine(err)}`.slice(0, MESSAGE_CHARS) };
      if (runnable.type === 'hook' && runnable.parent)
        failedHooks.push({ suite: runnable.parent, message: firstLine(err), error });
      else errors.push(error);
    });
    runner.once('end', () => {
      // A failed hook fails the tests it kept from running; it is an error of its own only when no case
      // under its suite carries the failure (an after hook that failed once every test had passed).
      for (const { suite, message, error } of failedHooks) {
        failUnrun(runner, suite, message, outcomes);
        if (!anyFailed(suite, outcomes)) errors.push(error);
      }
      state.doc = { format: FORMAT, started: true, complete: true, cases: [...outcomes.values()], errors };
      state.ended = true;
      writeReport(output, state.doc);
      summarise(state.doc);
      // Added now, so it runs after every exit listener the test files added.
      process.on('exit', () => writeReport(output, state.doc));
    });
  }
}

module.exports = VtnodeJsonReporter;
