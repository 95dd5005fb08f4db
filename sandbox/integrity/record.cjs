'use strict';
// What every runner's integrity harness shares: attributing a write to the code that made it, recording
// violations, watching properties of the runner's task objects, and the sentinel's one-line message.
const { createHash, createHmac, createSecretKey } = require('node:crypto');
const { accessSync, constants: fsConstants, readFileSync, realpathSync } = require('node:fs');
const { fileURLToPath } = require('node:url');
const { types } = require('node:util');
const { callSites: sitesAbove, pristine } = require('./harden.cjs');

/** Prefix of the sentinel's failure message; the scorer reads the JSON that follows it. */
const SENTINEL_PREFIX = 'vtnode-sentinel:';
/** Name of the sentinel test appended to every judged test file. */
const SENTINEL_NAME = 'vtnode:sentinel';
const MAX_VIOLATIONS = 20;
const HARNESS_DIR = `${__dirname}/`;
/** The environment variable the host passes the run's sentinel key in (hex); read once, then removed. */
const KEY_VARIABLE = 'VTNODE_SENTINEL_KEY';

// The run's key, taken out of the environment when the harness first loads in a process (before any
// workspace module) and kept only here, as a key object whose bytes live outside the JavaScript heap.
// The candidate, loaded later, finds it neither in process.env nor in this module's exports; what stays
// readable is the process's initial environment in /proc (see docs/sandbox.md, "The sentinel's seal").
const SEAL_KEY = (() => {
  const hex = process.env[KEY_VARIABLE];
  delete process.env[KEY_VARIABLE];
  if (typeof hex !== 'string' || !/^[0-9a-f]{64}$/.test(hex)) return null;
  return createSecretKey(Buffer.from(hex, 'hex'));
})();
// The HMAC's methods, taken before the candidate loads: a patched prototype would otherwise see (and
// could replace) what the harness seals.
const hmacProto = Object.getPrototypeOf(createHmac('sha256', 'probe'));
const hmacUpdate = hmacProto.update;
const hmacDigest = hmacProto.digest;
const hashProto = Object.getPrototypeOf(createHash('sha256'));
const hashUpdate = hashProto.update;
const hashDigest = hashProto.digest;

/** Hex SHA-256 of `data` through the methods captured at load. */
function sha256(data) {
  const h = createHash('sha256');
  pristine.apply(hashUpdate, h, [data]);
  return pristine.apply(hashDigest, h, ['hex']);
}

/** The seal of a sentinel report: HMAC-SHA256 of the file and the report's text under the run's key. */
function seal(file, text) {
  if (!SEAL_KEY) return '-';
  const h = createHmac('sha256', SEAL_KEY);
  pristine.apply(hmacUpdate, h, [`${file}\n${text}`]);
  return pristine.apply(hmacDigest, h, ['hex']);
}

/** Short digest of a test's name: what the sentinel reports of each test it saw fail. */
function nameDigest(name) {
  return sha256(name).slice(0, 16);
}

/**
 * The trusted folders of a runner: the real paths of its installed packages, kept only when they are
 * read-only (a writable folder could be given a file that calls itself the runner) and outside the box.
 * Where they are does not matter beyond that: a workspace a node fetched into a data dir under /tmp has
 * its dependencies bound read-only at their real paths inside the box's writable /tmp, and a file the
 * candidate writes there is in no root (nor has the runner's script hash).
 */
function trustedRoots(dirs, box) {
  const boxDir = box.endsWith('/') ? box : `${box}/`;
  const out = [];
  for (const dir of dirs) {
    let real;
    try {
      real = realpathSync(dir);
    } catch {
      continue;
    }
    if (`${real}/`.startsWith(boxDir)) continue;
    let writable = true;
    try {
      accessSync(real, fsConstants.W_OK);
    } catch {
      writable = false;
    }
    if (!writable) out.push(`${real}/`);
  }
  return out;
}

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
function createRecorder({ box, roots = [] }) {
  const violations = [];
  const boxDir = box.endsWith('/') ? box : `${box}/`;
  /** file → true when it is a module of the runner as it is on disk (real path in a root, same text). */
  const verdicts = new Map();

  function runnerModule(file, site) {
    if (file.startsWith(boxDir) || !file.startsWith('/')) return false;
    let real = verdicts.get(file);
    if (real === undefined) {
      real = null;
      try {
        const path = realpathSync(file);
        if (roots.some((r) => path.startsWith(r))) real = sha256(readFileSync(path));
      } catch {
        real = null;
      }
      verdicts.set(file, real);
    }
    // A script compiled from other text under the runner's file name (node:vm's `filename`, a module
    // compiled by hand) has another hash: V8's script hash is the SHA-256 of the script's source.
    return real !== null && site.getScriptHash?.() === real;
  }

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
      return { file: `${file}:${line}`, trusted: runnerModule(file, site) };
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

const ASYMMETRIC_TYPEOF = Symbol.for('jest.asymmetricMatcher');
const isMap = types.isMap;
const isSet = types.isSet;
/** Most properties one received value is searched through (a bigger value is searched this far). */
const SCAN_BUDGET = 1_000_000;

function isObject(v) {
  return (typeof v === 'object' && v !== null) || typeof v === 'function';
}

/** True when `v` answers like an asymmetric matcher to any of the runners' checks (or throws when asked). */
function looksAsymmetric(v) {
  try {
    return 'asymmetricMatch' in v || v.asymmetricMatch !== undefined || v.$$typeof === ASYMMETRIC_TYPEOF;
  } catch {
    return true;
  }
}

/** The values `v` holds that an equality check compares (own properties, getters read; entries). */
function childrenOf(v, budget) {
  const out = [];
  const add = (x, key) => {
    if (isObject(x)) out.push([x, key]);
  };
  if (isMap(v))
    for (const [k, x] of v) {
      add(k, '<map key>');
      add(x, '<map value>');
    }
  else if (isSet(v)) for (const x of v) add(x, '<set value>');
  // A typed array's elements are numbers: nothing to search.
  if (types.isTypedArray(v) || types.isArrayBuffer(v)) return out;
  let keys;
  try {
    keys = pristine.ownKeys(v);
  } catch {
    return out;
  }
  for (const key of keys) {
    if (budget.left-- <= 0) break;
    let x;
    try {
      x = v[key];
    } catch {
      continue;
    }
    add(x, String(key));
  }
  return out;
}

/**
 * Where in a received value something answers as an asymmetric matcher (`asymmetricMatch` own,
 * inherited, from a getter or a Proxy, or jest's `$$typeof`), as a path, or null. jest's and vitest's
 * equality let the *received* side's matcher decide, so the candidate could return one: only the test's
 * expected side may hold matchers. The search reads at most SCAN_BUDGET properties.
 */
function asymmetricIn(value) {
  if (!isObject(value)) return null;
  const seen = new WeakSet();
  const stack = [[value, 'received']];
  const budget = { left: SCAN_BUDGET };
  while (stack.length > 0 && budget.left > 0) {
    const [v, path] = stack.pop();
    if (seen.has(v)) continue;
    seen.add(v);
    budget.left--;
    if (looksAsymmetric(v)) return path;
    for (const [x, key] of childrenOf(v, budget)) if (!seen.has(x)) stack.push([x, `${path}.${key}`]);
  }
  return null;
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

/**
 * Throws the sentinel's failure: one line, the prefix, the seal (HMAC under the run's key, `-` without
 * one), a colon, then the state as JSON. `file` is the judged file's absolute path; the host checks the
 * seal against the file it reads the sentinel from, so a report moved, edited or made up does not pass.
 */
function reportSentinel(state, file) {
  const text = pristine.stringify({ ...state, file });
  throw new pristine.errorCtor(`${SENTINEL_PREFIX}${seal(file, text)}:${text}`);
}

let sealerTaken = false;

/**
 * A report thrower sealed by `mac(file, text)` instead of this module's key (jest keeps its key in the
 * worker's main realm, see jest.cjs).
 */
function sealerWith(mac) {
  return (state, file) => {
    const text = pristine.stringify({ ...state, file });
    throw new pristine.errorCtor(`${SENTINEL_PREFIX}${mac(file, text)}:${text}`);
  };
}

/**
 * reportSentinel, handed out once per instance of this module: the runner's harness takes it when it
 * loads, before the candidate, so the candidate can never have a report of its own making sealed.
 * Later calls return null.
 */
function takeSealer() {
  if (sealerTaken) return null;
  sealerTaken = true;
  return reportSentinel;
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
  takeSealer,
  sealerWith,
  nameDigest,
  trustedRoots,
  KEY_VARIABLE,
  asymmetricIn,
};
