// The recorder of the differential replay: loaded by the wrapper modules of a recording box
// (sandbox/replay/wrapper.ts), one at the target's path and one at the path of each module the tests
// import besides it. It records, per test file and in order, every call the tests make into those
// modules' exports: functions, constructors, static and prototype methods and getters of exported
// classes, with their arguments, results or thrown errors, settled promises, the receiver's state and
// the arguments after the call. Calls into the target are compared; calls into the other modules
// (`m`: which one) are performed again by the replay so that the objects the tests built exist there
// too. Calls made while another recorded call runs (the modules' own) are not recorded. One JSON line
// per event in `<out>/rec-<n>.jsonl` (n: the test file's index in the task).
import { appendFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encode } from './codec.mjs';
import { installRandom } from './determinism.mjs';

const EXPECT = Symbol.for('expect-global');
/** The recording is written next to this module (`<box>/.vtnode-replay/`); test files are box-relative. */
const OUT = dirname(fileURLToPath(import.meta.url));
const BOX = dirname(OUT);
const PATCHED = new WeakSet();

// Shared by every wrapper of one module registry (one test file, as the runner isolates them).
let depth = 0;
const files = new Map();
/** Export (proxy and real value) → { m, x }: m is '' for the target. */
const exported = new WeakMap();
/** Exports of the modules the target imports (not wrapped), by specifier: classes and objects. */
const imported = new WeakMap();
const reseed = installRandom();

const expectState = () => {
  try {
    return globalThis[EXPECT]?.getState?.() ?? {};
  } catch {
    return {};
  }
};

function fileState(testFiles) {
  const path = expectState().testPath ?? '';
  let st = files.get(path);
  if (!st) {
    const n = testFiles.indexOf(relative(BOX, path).split('\\').join('/'));
    st = { n: 0, where: new WeakMap(), out: join(OUT, `rec-${n < 0 ? 'x' : n}.jsonl`) };
    files.set(path, st);
  }
  return st;
}

const write = (st, event) => appendFileSync(st.out, `${JSON.stringify(event)}\n`);

/** The module and export naming a class another module exports (instances passed in are rebuilt from it). */
function klass(ctor) {
  if (typeof ctor !== 'function') return undefined;
  const e = exported.get(ctor);
  if (e && e.m !== '') return e;
  return imported.get(ctor);
}

const refOf = (st) => (o) => {
  const e = exported.get(o) ?? imported.get(o);
  if (e !== undefined) return e.m === '' ? { $: 'ref', x: e.x, p: [] } : { $: 'ref', m: e.m, x: e.x, p: [] };
  const w = st.where.get(o);
  return w && { $: 'ref', c: w.c, p: w.p };
};

const seenBy = (st, c, prefix) => (o, p) => {
  if (!exported.has(o) && !st.where.has(o)) st.where.set(o, { c, p: [...prefix, ...p] });
};

function plain(kind, f, self, args, newTarget) {
  return kind === 'new' ? Reflect.construct(f, args, newTarget) : Reflect.apply(f, self, args);
}

function settle(st, i, promise) {
  const done = (key) => (v) => {
    try {
      write(st, { e: 'settle', i, [key]: encode(v, { seen: seenBy(st, i, ['P']) }) });
    } catch {}
  };
  try {
    Promise.resolve(promise).then(done('ok'), done('err'));
  } catch {}
}

/**
 * @param {{ testFiles: string[], owner: string }} config the judged test files (box-relative, in the
 *   task's order) and the wrapped module's key ('' for the target)
 * @param {() => Record<string, object>} modules the namespaces of the modules the target imports, by
 *   key (read at the first call: the imports may not have loaded when the wrapper does)
 */
export function createRecorder(config, modules = () => ({})) {
  const owner = config.owner ?? '';
  let indexed = false;
  const indexImports = () => {
    if (indexed) return;
    indexed = true;
    try {
      for (const [m, ns] of Object.entries(modules()))
        for (const x of Object.keys(ns)) {
          const v = ns[x];
          if (v !== null && (typeof v === 'object' || typeof v === 'function') && !imported.has(v))
            imported.set(v, { m, x });
        }
    } catch {}
  };

  /** Runs one call through the recorder (nested calls, made by the modules themselves, run plain). */
  function invoke(kind, name, f, self, args, newTarget) {
    if (depth > 0) return plain(kind, f, self, args, newTarget);
    indexImports();
    const st = fileState(config.testFiles);
    const i = st.n++;
    const ref = refOf(st);
    const event = { e: 'call', i, kind, name, test: expectState().currentTestName ?? null };
    if (owner !== '') event.m = owner;
    event.t = Date.now();
    event.pn = typeof performance === 'object' ? performance.now() : 0;
    if (kind === 'method' || kind === 'get' || kind === 'static')
      event.self = ref(self) ?? {
        $: 'opaque',
        why: 'the receiver is not an object a recorded call handed out',
      };
    event.args = args.map((a) => encode(a, { ref, klass }));
    reseed(i);
    let result;
    let threw = false;
    depth++;
    try {
      result = plain(kind, f, self, args, newTarget);
    } catch (err) {
      threw = true;
      result = err;
    } finally {
      depth--;
    }
    depth++;
    try {
      event.out = { [threw ? 't' : 'r']: encode(result, { seen: seenBy(st, i, []) }) };
      event.after = args.map((a) => encode(a, { ref }));
      if (event.self?.$ === 'ref') event.selfAfter = encode(self);
    } finally {
      depth--;
    }
    write(st, event);
    if (!threw && result !== null && typeof result === 'object' && typeof result.then === 'function')
      settle(st, i, result);
    if (threw) throw result;
    return result;
  }

  function method(kind, key, orig) {
    return {
      [key](...args) {
        return invoke(kind, String(key), orig, this, args);
      },
    }[key];
  }

  /** Records the methods and getters of a prototype chain (up to a builtin's prototype). */
  function patchProto(proto) {
    for (let p = proto; p && p !== Object.prototype && !PATCHED.has(p); p = Object.getPrototypeOf(p)) {
      const ctor = p.constructor;
      if (typeof ctor === 'function' && globalThis[ctor.name] === ctor) break;
      PATCHED.add(p);
      for (const key of Object.getOwnPropertyNames(p)) {
        if (key === 'constructor') continue;
        const d = Object.getOwnPropertyDescriptor(p, key);
        if (!d?.configurable) continue;
        if (typeof d.value === 'function')
          Object.defineProperty(p, key, { ...d, value: method('method', key, d.value) });
        else if (d.get) {
          const get = d.get;
          Object.defineProperty(p, key, {
            ...d,
            get() {
              return invoke('get', key, get, this, []);
            },
          });
        }
      }
    }
  }

  function patchStatics(f) {
    for (const key of Object.getOwnPropertyNames(f)) {
      if (key === 'prototype' || key === 'length' || key === 'name') continue;
      const d = Object.getOwnPropertyDescriptor(f, key);
      if (d?.configurable && typeof d.value === 'function')
        Object.defineProperty(f, key, { ...d, value: method('static', key, d.value) });
    }
  }

  /** The value a wrapper exports for its module's export `name` (an export already wrapped is kept). */
  function wrap(name, value) {
    if (typeof value === 'function') {
      if (exported.has(value)) return value;
      if (value.prototype && typeof value.prototype === 'object') patchProto(value.prototype);
      patchStatics(value);
      const proxy = new Proxy(value, {
        apply: (f, self, args) => invoke('fn', name, f, self, args),
        construct: (f, args, nt) =>
          nt === proxy ? invoke('new', name, f, undefined, args, f) : Reflect.construct(f, args, nt),
      });
      exported.set(proxy, { m: owner, x: name });
      exported.set(value, { m: owner, x: name });
      return proxy;
    }
    register(name, value);
    return value;
  }

  /** Registers an exported object (a `let` binding stays live), so tests may pass it back. */
  function register(name, value) {
    if (value === null || typeof value !== 'object' || exported.has(value)) return;
    exported.set(value, { m: owner, x: name });
    if (Object.getPrototypeOf(value) === Object.prototype && !Object.isFrozen(value))
      for (const key of Object.keys(value)) {
        const d = Object.getOwnPropertyDescriptor(value, key);
        if (d?.writable && d.configurable && typeof d.value === 'function')
          Object.defineProperty(value, key, { ...d, value: method('method', key, d.value) });
      }
  }

  return { wrap, register };
}
