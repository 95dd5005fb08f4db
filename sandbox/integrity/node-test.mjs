// node:test's integrity harness: imported (or required) first by every judged test file. node:test,
// node:assert and node:assert/strict are builtins, so the harness reaches the very modules the test file
// uses. Each test file runs in its own process, so this module's state is one file's.
import assert from 'node:assert';
import strict from 'node:assert/strict';
import { createRequire } from 'node:module';
import process from 'node:process';
import nodeTest from 'node:test';
import { bindingWrites, freezeChannels, freezeExports, hardenIntrinsics } from './harden.cjs';
import { mustFail, mustPass, mutationState, takeSealer } from './record.cjs';

// Taken when this module loads, before any candidate: only this module's sentinel is sealed.
const reportSentinel =
  takeSealer() ??
  (() => {
    throw new Error('vtnode: the integrity harness was loaded twice');
  });
hardenIntrinsics();
// The child process's results travel on its stdout: the streams and serializers are frozen.
freezeChannels(process, createRequire(import.meta.url), { stdout: true });
const readGlobals = bindingWrites();
freezeExports(assert, 'node:assert');
freezeExports(strict, 'node:assert/strict');
freezeExports(nodeTest, 'node:test');

async function canaries() {
  return {
    strictEqual: await mustFail(() => strict.strictEqual(1, 2)),
    equal: await mustFail(() => assert.equal(1, 2)),
    notStrictEqual: await mustFail(() => strict.notStrictEqual(1, 1)),
    deepStrictEqual: await mustFail(() => strict.deepStrictEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 3 }] })),
    deepEqual: await mustFail(() => assert.deepEqual(new Map([[1, 2]]), new Map([[1, 3]]))),
    deepEqualDate: await mustFail(() => strict.deepStrictEqual(new Date(0), new Date(1))),
    ok: await mustFail(() => strict.ok(0)),
    throws: await mustFail(() => strict.throws(() => 1)),
    rejects: await mustFail(() => strict.rejects(Promise.resolve(1))),
    match: await mustFail(() => strict.match('abc', /z/)),
    fail: await mustFail(() => strict.fail('canary')),
    equalPasses: await mustPass(() => strict.deepStrictEqual({ a: [1] }, { a: [1] })),
  };
}

/**
 * The sentinel test's body. The judged test file registers it last (`test('vtnode:sentinel', () =>
 * sentinelBody(file))`, so node:test files it under the test file): it must fail, carrying the harness
 * state, sealed for `file` (the judged file's absolute path).
 */
export async function sentinelBody(file) {
  reportSentinel(
    {
      v: 1,
      runner: 'node:test',
      canaries: await canaries(),
      importChanges: [],
      runChanges: [],
      testers: 0,
      testersAfter: 0,
      violations: [],
      globals: readGlobals?.() ?? [],
      mutation: mutationState(),
    },
    String(file),
  );
}
