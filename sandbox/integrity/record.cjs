'use strict';
// What every runner's integrity harness shares: attributing a write to the code that made it, recording
// violations, watching properties of the runner's task objects, and the sentinel's one-line message.
const { fileURLToPath } = require('node:url');
const { callSites: sitesAbove, pristine } = require('./harden.cjs');

/** Prefix of the sentinel's failure message; the scorer reads the JSON that follows it. */
const SENTINEL_PREFIX = 'vtnode-sentinel:';
/** Name of the sentinel test appended to every judged test file. */
const SENTINEL_NAME = 'vtnode:sentinel';
const MAX_VIOLATIONS = 20;
const HARNESS_DIR = `${__dirname}/`;

function fileOf(site) {
  const name = site.getFileName?.() ?? null;
  if (!name) return null;
  // node:url's, not the global URL: a jsdom test environment replaces that one.
  return name.startsWith('file://') ? fileURLToPath(name) : name;
}

/**
 * Creates the recorder of one test file's run. `box` is the box's path: code that lives in it (the
 * candidate, the tests, workspace modules) must never write the runner's task state; the runner and the
 * workspace's dependencies (outside the box, read-only) may.
 */
function createRecorder({ box }) {
  const violations = [];
  const boxDir = box.endsWith('/') ? box : `${box}/`;

  /** The first frame that is neither the harness nor native code: who is writing. */
  function writer() {
    const sites = sitesAbove(writer);
    if (!Array.isArray(sites)) return { file: '<unknown>', trusted: false };
    for (const site of sites) {
      // Code built at run time (eval, new Function, the AsyncFunction constructor) has no file: it is
      // never trusted. Builtins (Object.assign, Reflect.set) have no file either: look past them.
      if (site.isEval?.()) return { file: `<eval> ${site.getEvalOrigin?.() ?? ''}`.trim(), trusted: false };
      const file = fileOf(site);
      if (file === null) continue;
      if (file.startsWith(HARNESS_DIR)) continue;
      const line = site.getLineNumber?.() ?? 0;
      const trusted = !file.startsWith(boxDir) && !file.startsWith('node:') && file.startsWith('/');
      return { file: `${file}:${line}`, trusted };
    }
    return { file: '<unknown>', trusted: false };
  }

  function violation(what) {
    if (violations.length < MAX_VIOLATIONS) violations.push(what);
  }

  /**
   * Guards `keys` of `obj`: a write from trusted code goes through; any other write is refused and
   * recorded. `onSet` sees every accepted value (to watch nested objects).
   */
  function watch(obj, keys, label, onSet) {
    for (const key of keys) {
      const d = pristine.getOwnPropertyDescriptor(obj, key);
      if (d && !d.configurable) continue;
      let value = d ? ('value' in d ? d.value : d.get?.call(obj)) : undefined;
      if (onSet && value !== undefined) value = onSet(value) ?? value;
      pristine.defineProperty(obj, key, {
        get: () => value,
        set(next) {
          const w = writer();
          if (!w.trusted) {
            violation(`${label}.${String(key)} written by ${w.file}`);
            return;
          }
          value = onSet && next !== undefined ? (onSet(next) ?? next) : next;
        },
        enumerable: d ? d.enumerable : true,
        configurable: false,
      });
    }
  }

  return { violations, watch, violation, writer };
}

/** Names of `obj`'s own properties whose value (or accessor) differs from `before`, plus new ones. */
function changedNames(before, obj) {
  const out = [];
  for (const key of pristine.ownKeys(obj)) {
    const d = pristine.getOwnPropertyDescriptor(obj, key);
    const b = before.get(key);
    const same = b && d && b.value === d.value && b.get === d.get && b.set === d.set;
    if (!same) out.push(String(key));
  }
  for (const key of before.keys())
    if (!pristine.getOwnPropertyDescriptor(obj, key)) out.push(`-${String(key)}`);
  return out.sort();
}

/** The own property descriptors of `obj`, for changedNames. */
function snapshot(obj) {
  const m = new Map();
  for (const key of pristine.ownKeys(obj)) m.set(key, pristine.getOwnPropertyDescriptor(obj, key));
  return m;
}

/** Runs `fn`; a canary must throw. Returns 'ok' when it did, 'passed' when it did not. */
async function mustFail(fn) {
  try {
    await fn();
    return 'passed';
  } catch {
    return 'ok';
  }
}

/** Runs `fn`; it must not throw. */
async function mustPass(fn) {
  try {
    await fn();
    return 'ok';
  } catch (err) {
    return `threw: ${String(err?.message ?? err).slice(0, 120)}`;
  }
}

/**
 * The canaries every jest-style `expect` (jest's, vitest's) must honour after the candidate loaded: each
 * matcher here must fail on unequal values, and deep equality of equal values must pass.
 */
async function expectCanaries(e) {
  return {
    toBe: await mustFail(() => e(1).toBe(2)),
    notToBe: await mustFail(() => e(1).not.toBe(1)),
    toEqual: await mustFail(() => e({ a: [1, { b: 2 }] }).toEqual({ a: [1, { b: 3 }] })),
    toEqualDate: await mustFail(() => e(new Date(0)).toEqual(new Date(1))),
    toEqualMap: await mustFail(() => e(new Map([[1, 2]])).toEqual(new Map([[1, 3]]))),
    toStrictEqual: await mustFail(() => e([1, undefined]).toStrictEqual([1])),
    toMatchObject: await mustFail(() => e({ a: 1, b: 2 }).toMatchObject({ a: 2 })),
    toThrow: await mustFail(() => e(() => 1).toThrow()),
    toBeTruthy: await mustFail(() => e(0).toBeTruthy()),
    toBeNull: await mustFail(() => e(1).toBeNull()),
    toMatch: await mustFail(() => e('abc').toMatch(/z/)),
    toContain: await mustFail(() => e([1]).toContain(2)),
    toHaveLength: await mustFail(() => e([1]).toHaveLength(2)),
    toHaveProperty: await mustFail(() => e({}).toHaveProperty('x')),
    toBeCloseTo: await mustFail(() => e(0.1).toBeCloseTo(0.3, 5)),
    toBeGreaterThan: await mustFail(() => e(1).toBeGreaterThan(2)),
    resolves: await mustFail(() => e(Promise.resolve(1)).resolves.toBe(2)),
    equalPasses: await mustPass(() => e({ a: [1] }).toEqual({ a: [1] })),
  };
}

/** The mutation/coverage state an instrumented target left on globalThis, if any. */
function mutationState() {
  const m = globalThis.__vtnode_mutation;
  if (!m || typeof m !== 'object') return null;
  return { active: m.active ?? null, hits: m.hits ?? 0, limitHit: m.limitHit === true, cov: m.cov ?? null };
}

/** Throws the sentinel's failure: one line, the prefix then the state as JSON. */
function reportSentinel(state) {
  const text = pristine.stringify(state);
  throw new pristine.errorCtor(`${SENTINEL_PREFIX}${text}`);
}

module.exports = {
  SENTINEL_PREFIX,
  SENTINEL_NAME,
  createRecorder,
  changedNames,
  snapshot,
  mustFail,
  mustPass,
  expectCanaries,
  mutationState,
  reportSentinel,
};
