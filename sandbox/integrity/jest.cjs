'use strict';
// jest's integrity harness, required first by every judged test file. jest runs each test file in its
// own vm context with a fresh module registry (this module is evaluated once per file), while `expect`,
// its matchers and the runner live in the worker's main realm, shared by the files the worker runs.
// Both realms are hardened: the file's (the candidate's own intrinsics) and the main one (the matchers'),
// reached through `expect`, a function of that realm.
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { bindingWrites, hardenIntrinsics } = require('./harden.cjs');
const { changedNames, expectCanaries, mutationState, reportSentinel, snapshot } = require('./record.cjs');

const JEST_MATCHERS = Symbol.for('$$jest-matchers-object');

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

// jest intercepts `@jest/globals` whoever requires it; a config with injectGlobals: false has no globals.
const expect = globalThis.expect ?? require('@jest/globals').expect;
// jest's context global refuses guarded bindings: they are frozen there (a test replacing a global fails).
hardenIntrinsics({ guardBindings: false });
const realm = mainRealmOf(expect);
if (realm) hardenRealm(realm);
// Captured now, before the candidate loads: who wrote the global bindings of both realms.
const readGlobals = bindingWrites();
const readMainGlobals = realm ? bindingWrites(realm) : null;
const globalWrites = () => [
  ...(readGlobals?.() ?? []),
  ...(readMainGlobals?.() ?? []).map((w) => `main realm: ${w}`),
];
const matchersObject = (realm ?? globalThis)[JEST_MATCHERS];
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
function sentinelBody() {
  importChanges ??= changes();
  const imported = importChanges;
  return async () => {
    reportSentinel({
      v: 1,
      runner: 'jest',
      canaries: await canaries(expect),
      importChanges: imported,
      runChanges: changes().filter((c) => !imported.includes(c)),
      testers: 0,
      testersAfter: (matchersObject?.customEqualityTesters?.length ?? 0) - testersBefore,
      violations: [],
      globals: globalWrites(),
      mutation: mutationState(),
    });
  };
}

module.exports = { sentinelBody };
