'use strict';
// jest's integrity harness, required first by every judged test file. jest runs each test file in its
// own vm context with a fresh module registry (this module is evaluated once per file), while `expect`,
// its matchers and the runner live in the worker's main realm, shared by the files the worker runs.
// Both realms are hardened: the file's (the candidate's own intrinsics) and the main one (the matchers'),
// reached through `expect`, a function of that realm.
// The worker's real process: a context's `process` is a copy (its getBuiltinModule hands out the copy
// too), but the context's Buffer is the worker's own, and so is its Function constructor. The run's key
// is read from the real environment before anything else of the harness loads, and removed from it.
function workerProcess() {
  try {
    const real = Buffer.constructor('return process')();
    if (real && typeof real === 'object' && real.env) return real;
  } catch {
    // A Buffer of the context's own realm: the context's process is all there is.
  }
  return process;
}
const realProcess = workerProcess();
const KEY_NAME = 'VTNODE_SENTINEL_KEY';
const keyHex = realProcess.env[KEY_NAME] ?? process.env[KEY_NAME];
delete realProcess.env[KEY_NAME];
delete process.env[KEY_NAME];
const { createHmac, createSecretKey } = require('node:crypto');
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { bindingWrites, freezeChannels, hardenIntrinsics, pristine } = require('./harden.cjs');
const {
  asymmetricIn,
  changedNames,
  expectCanaries,
  mutationState,
  nameDigest,
  sealerWith,
  snapshot,
} = require('./record.cjs');

const JEST_MATCHERS = Symbol.for('$$jest-matchers-object');
/** Where the worker's main realm keeps what the files of the worker share (see workerShared). */
const SHARED = Symbol.for('vtnode.integrity.jest');
/** Most failed tests the sentinel names (by digest). */
const MAX_FAILED_NAMES = 2000;

/** The worker's main realm, where expect() and its matchers were loaded, or null. */
function mainRealmOf(expect) {
  if (typeof expect !== 'function') return null;
  try {
    const realm = expect.constructor('return globalThis')();
    return realm === globalThis ? null : realm;
  } catch {
    return null;
  }
}

/** Runs harden.cjs inside another realm, with that realm's own Function constructor. */
function hardenRealm(realm) {
  const source = readFileSync(join(__dirname, 'harden.cjs'), 'utf8');
  const module = { exports: {} };
  realm.Function('module', 'exports', 'require', source)(module, module.exports, () => ({}));
  module.exports.hardenIntrinsics();
}

/**
 * What the files of one worker share, made by the worker's first judged file before its candidate loads
 * and kept on the worker's real process object under a non-configurable symbol:
 * - `seal(path)`: the sealing function of one test file, handed out once per path (the file's harness
 *   takes its own before the file's candidate loads). The run's key is moved out of the worker's real
 *   environment into this closure, so later files' contexts (copies of that environment) never see it;
 * - `asymmetric()`: the violations the guarded matchers recorded so far (every file's, in order).
 */
function workerShared(host) {
  const existing = host[SHARED];
  if (existing) return existing;
  const hex = keyHex;
  const key =
    typeof hex === 'string' && /^[0-9a-f]{64}$/.test(hex) ? createSecretKey(Buffer.from(hex, 'hex')) : null;
  const taken = new Set();
  const mac = (file, text) =>
    key ? createHmac('sha256', key).update(`${file}\n${text}`).digest('hex') : '-';
  const seal = (path) => {
    if (taken.has(path)) return null;
    taken.add(path);
    return (file, text) => (file === path ? mac(file, text) : '-');
  };
  const log = [];
  const guarded = new WeakSet();
  // Each matchers table once (jest ≥ 30 makes one per file, older ones share the main realm's).
  const guard = (matchersObject, expect) => {
    const table = matchersObject?.matchers;
    if (!table || guarded.has(table)) return;
    guarded.add(table);
    guardMatchers(table, expect, log);
  };
  const shared = Object.freeze({
    seal: Object.freeze(seal),
    guard: Object.freeze(guard),
    asymmetric: Object.freeze(() => log.slice()),
  });
  pristine.defineProperty(host, SHARED, {
    value: shared,
    enumerable: false,
    writable: false,
    configurable: false,
  });
  return shared;
}

/**
 * Wraps every matcher of jest's table (shared by the worker's files) so that a received value answering
 * as an asymmetric matcher fails the assertion and is logged for the file's sentinel.
 */
function guardMatchers(table, expect, log) {
  for (const key of pristine.ownKeys(table)) {
    const d = pristine.getOwnPropertyDescriptor(table, key);
    if (!d?.configurable || typeof d.value !== 'function') continue;
    const matcher = d.value;
    const name = String(key);
    const guarded = {
      [name](received, ...rest) {
        const at = asymmetricIn(received);
        if (at !== null) {
          const test = expect.getState?.().currentTestName ?? '';
          if (log.length < 100)
            log.push(`a received value answers as an asymmetric matcher (${at}, .${name}) in "${test}"`);
          throw new pristine.errorCtor(`vtnode: the received value carries asymmetricMatch at ${at}`);
        }
        return pristine.apply(matcher, this, [received, ...rest]);
      },
    }[name];
    // jest marks its own matchers (for stack traces): the marks carry over.
    for (const k of pristine.ownKeys(matcher)) if (typeof k === 'symbol') guarded[k] = matcher[k];
    pristine.defineProperty(table, key, { ...d, value: guarded });
  }
}

/** jest-circus's state of this file (its symbol is private: found by its description). */
function circusState() {
  for (const sym of Object.getOwnPropertySymbols(globalThis))
    if (sym.description === 'JEST_STATE_SYMBOL') return globalThis[sym];
  return null;
}

/**
 * What the worker saw of the file's tests (see vitest.mjs outcomes): from jest-circus's describe blocks,
 * a finished test with errors failed, one without passed.
 */
function outcomes(sentinelName) {
  const out = { passed: 0, pending: 0, failed: 0, failedNames: [] };
  const visit = (block, path) => {
    for (const child of block?.children ?? []) {
      if (child.type === 'describeBlock') {
        visit(child, [...path, child.name]);
        continue;
      }
      if (path.length === 0 && child.name === sentinelName) continue;
      if (
        child.status === 'skip' ||
        child.status === 'todo' ||
        child.mode === 'skip' ||
        child.mode === 'todo'
      )
        continue;
      if (child.status !== 'done') out.pending++;
      else if ((child.errors?.length ?? 0) > 0) {
        out.failed++;
        if (out.failedNames.length < MAX_FAILED_NAMES)
          out.failedNames.push(nameDigest([...path, child.name].join(' > ')));
      } else out.passed++;
    }
  };
  visit(circusState()?.rootDescribeBlock, []);
  return out;
}

// jest intercepts `@jest/globals` whoever requires it; a config with injectGlobals: false has no globals.
const expect = globalThis.expect ?? require('@jest/globals').expect;
// jest's context global refuses guarded bindings: they are frozen there (a test replacing a global fails).
hardenIntrinsics({ guardBindings: false });
const realm = mainRealmOf(expect);
if (realm) hardenRealm(realm);
// The real process's IPC path is frozen before the candidate loads; it keeps what the files share.
freezeChannels(realProcess, require);
// Captured now, before the candidate loads: who wrote the global bindings of both realms.
const readGlobals = bindingWrites();
const readMainGlobals = realm ? bindingWrites(realm) : null;
const globalWrites = () => [
  ...(readGlobals?.() ?? []),
  ...(readMainGlobals?.() ?? []).map((w) => `main realm: ${w}`),
];
const matchersObject = (realm ?? globalThis)[JEST_MATCHERS];
const shared = workerShared(realProcess);
shared.guard(matchersObject, expect);
const testPath = expect.getState?.().testPath ?? '';
const sealFile = shared.seal(testPath);
const reportSentinel = sealerWith((file, text) => (sealFile ? sealFile(file, text) : '-'));
const asymmetricBefore = shared.asymmetric().length;
const tables = matchersObject ? [['matchers', matchersObject.matchers]] : [];
const before = tables.map(([name, t]) => [name, snapshot(t)]);
const testersBefore = matchersObject?.customEqualityTesters?.length ?? 0;
let importChanges = null;

function changes() {
  return before.flatMap(([name, snap], i) => changedNames(snap, tables[i][1]).map((k) => `${name}.${k}`));
}

async function canaries(e) {
  if (typeof e !== 'function') return { expect: 'threw: expect() is not reachable' };
  return expectCanaries(e);
}

/** Called by the sentinel's registration, after the file's top-level code: what its imports changed. */
function sentinelBody(file = testPath) {
  importChanges ??= changes();
  const imported = importChanges;
  return async () => {
    reportSentinel(
      {
        v: 1,
        runner: 'jest',
        canaries: await canaries(expect),
        importChanges: imported,
        runChanges: changes().filter((c) => !imported.includes(c)),
        testers: 0,
        testersAfter: (matchersObject?.customEqualityTesters?.length ?? 0) - testersBefore,
        violations: shared.asymmetric().slice(asymmetricBefore, asymmetricBefore + 20),
        globals: globalWrites(),
        mutation: mutationState(),
        outcomes: outcomes('vtnode:sentinel'),
      },
      file,
    );
  };
}

module.exports = { sentinelBody };
