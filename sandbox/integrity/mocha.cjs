'use strict';
// mocha's integrity harness, required first by every judged test file. mocha loads every test file in one
// process with one module cache, so this module is evaluated once (by the first file) and hardens the
// intrinsics before any candidate loads; each file then appends its own sentinel suite, last in the file,
// which runs after the file's suites (mocha runs a suite's tests, then its child suites in order).
const { createRequire } = require('node:module');
const assert = require('node:assert');
const strict = require('node:assert/strict');
const { bindingWrites, freezeExports, hardenIntrinsics } = require('./harden.cjs');
const { changedNames, mustFail, mustPass, mutationState, snapshot, takeSealer } = require('./record.cjs');

// Taken when this module loads (with the first judged file, before any candidate).
const reportSentinel =
  takeSealer() ??
  (() => {
    throw new Error('vtnode: the integrity harness was loaded twice');
  });

hardenIntrinsics();
const readGlobals = bindingWrites();
freezeExports(assert, 'node:assert');
freezeExports(strict, 'node:assert/strict');

/** chai as the workspace has it (the instance the test files get), or null. */
function chaiFor(testFile) {
  try {
    return createRequire(testFile)('chai');
  } catch {
    return null;
  }
}

let chai;
let chaiBefore = null;

function chaiChanges() {
  return chaiBefore ? changedNames(chaiBefore, chai.Assertion.prototype).map((k) => `chai.${k}`) : [];
}

async function canaries() {
  const c = {
    strictEqual: await mustFail(() => strict.strictEqual(1, 2)),
    deepStrictEqual: await mustFail(() => strict.deepStrictEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 3 }] })),
    deepEqual: await mustFail(() => assert.deepEqual(new Map([[1, 2]]), new Map([[1, 3]]))),
    ok: await mustFail(() => strict.ok(0)),
    throws: await mustFail(() => strict.throws(() => 1)),
    rejects: await mustFail(() => strict.rejects(Promise.resolve(1))),
    equalPasses: await mustPass(() => strict.deepStrictEqual({ a: [1] }, { a: [1] })),
  };
  if (chai?.expect) {
    c.chaiEqual = await mustFail(() => chai.expect(1).to.equal(2));
    c.chaiDeepEqual = await mustFail(() => chai.expect({ a: [1] }).to.deep.equal({ a: [2] }));
    c.chaiNot = await mustFail(() => chai.expect(1).not.to.equal(1));
    c.chaiThrow = await mustFail(() => chai.expect(() => 1).to.throw());
    c.chaiAssert = await mustFail(() => chai.assert.deepEqual([1], [2]));
  }
  return c;
}

/**
 * Called on the first line of every judged file (`file`: its path in the box): the first call takes
 * chai's pristine prototype, before the first test file — and so the candidate — imports chai.
 */
function prime(file) {
  if (chai !== undefined) return;
  chai = chaiFor(file);
  chaiBefore = chai?.Assertion ? snapshot(chai.Assertion.prototype) : null;
}

/** The sentinel of one test file, registered at the end of the file (after its imports ran). */
function sentinelBody(file) {
  prime(file);
  const imported = chaiChanges();
  return async () => {
    reportSentinel(
      {
        v: 1,
        runner: 'mocha',
        canaries: await canaries(),
        importChanges: imported,
        runChanges: chaiChanges().filter((c) => !imported.includes(c)),
        testers: 0,
        testersAfter: 0,
        violations: [],
        globals: readGlobals?.() ?? [],
        mutation: mutationState(),
      },
      file,
    );
  };
}

module.exports = { prime, sentinelBody };
