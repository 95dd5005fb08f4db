// The recorder of the differential replay: loaded by the wrapper module that stands at the target's
// path in a recording box (sandbox/replay/wrapper.ts). It records, per test file and in order, every
// call the tests make into the target's exports: functions, constructors, static and prototype methods
// and getters (of exported classes and of every class whose instances a call hands out), with their
// arguments, results or thrown errors, settled promises, the receiver's state after the call and the
// arguments after it. One JSON line per event in `<out>/rec-<n>.jsonl` (n: the test file's index).
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

/**
 * @param {{ testFiles: string[] }} config the judged test files, box-relative, in the task's order
 * @param {Record<string, object>} modules the namespaces of the modules the target imports, by specifier
 */
export function createRecorder(config, modules = {}) {
  let depth = 0;
  const files = new Map();
  const exported = new WeakMap();
  const reseed = installRandom();
  // What other modules export: their classes name the instances passed in, their objects are refs.
  const foreign = new WeakMap();
  for (const [m, ns] of Object.entries(modules))
    for (const x of Object.keys(ns)) {
      const v = ns[x];
      if (v !== null && (typeof v === 'object' || typeof v === 'function') && !foreign.has(v))
        foreign.set(v, { m, x });
    }
  const klass = (ctor) => (typeof ctor === 'function' ? foreign.get(ctor) : undefined);

  const expectState = () => {
    try {
      return globalThis[EXPECT]?.getState?.() ?? {};
    } catch {
      return {};
    }
  };
  const fileState = () => {
    const path = expectState().testPath ?? '';
    let st = files.get(path);
    if (!st) {
      const n = config.testFiles.indexOf(relative(BOX, path).split('\\').join('/'));
      st = { n: 0, where: new WeakMap(), out: join(OUT, `rec-${n < 0 ? 'x' : n}.jsonl`) };
      files.set(path, st);
    }
    return st;
  };
  const write = (st, event) => appendFileSync(st.out, `${JSON.stringify(event)}\n`);
  const refOf = (st) => (o) => {
    const x = exported.get(o);
    if (x !== undefined) return { $: 'ref', x, p: [] };
    const f = foreign.get(o);
    if (f !== undefined) return { $: 'ref', m: f.m, x: f.x, p: [] };
    const w = st.where.get(o);
    return w && { $: 'ref', c: w.c, p: w.p };
  };
  const seenBy = (st, c, prefix) => (o, p) => {
    if (!exported.has(o) && !st.where.has(o)) st.where.set(o, { c, p: [...prefix, ...p] });
    patchInstance(o);
  };

  function plain(kind, f, self, args, newTarget) {
    return kind === 'new' ? Reflect.construct(f, args, newTarget) : Reflect.apply(f, self, args);
  }

  function settle(st, i, promise) {
    const done = (key) => (v) => {
      try {
        write(st, { e: 'settle', i, [key]: encode(v, { seen: seenBy(st, i, ['P']), klass }) });
      } catch {}
    };
    try {
      Promise.resolve(promise).then(done('ok'), done('err'));
    } catch {}
  }

  /** Runs one call through the recorder (nested calls, made by the target itself, run plain). */
  function invoke(kind, name, f, self, args, newTarget) {
    if (depth > 0) return plain(kind, f, self, args, newTarget);
    const st = fileState();
    const i = st.n++;
    const ref = refOf(st);
    const event = { e: 'call', i, kind, name, test: expectState().currentTestName ?? null };
    event.t = Date.now();
    event.pn = typeof performance === 'object' ? performance.now() : 0;
    if (kind === 'method' || kind === 'get' || kind === 'static')
      event.self = ref(self) ?? { $: 'opaque', why: 'the receiver is not an object the target handed out' };
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
      event.out = { [threw ? 't' : 'r']: encode(result, { seen: seenBy(st, i, []), klass }) };
      event.after = args.map((a) => encode(a, { ref, klass }));
      if (event.self?.$ === 'ref') event.selfAfter = encode(self, { klass });
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

  /** Records the methods of an object's class when the target defines it (not another module). */
  function patchInstance(o) {
    if (typeof o !== 'object' || o === null || Array.isArray(o)) return;
    const p = Object.getPrototypeOf(o);
    if (p && p !== Object.prototype && !klass(p.constructor)) patchProto(p);
  }

  function patchStatics(f) {
    for (const key of Object.getOwnPropertyNames(f)) {
      if (key === 'prototype' || key === 'length' || key === 'name') continue;
      const d = Object.getOwnPropertyDescriptor(f, key);
      if (d?.configurable && typeof d.value === 'function')
        Object.defineProperty(f, key, { ...d, value: method('static', key, d.value) });
    }
  }

  /** The value the wrapper exports for the target's export `name`. */
  function wrap(name, value) {
    if (typeof value === 'function') {
      if (value.prototype && typeof value.prototype === 'object') patchProto(value.prototype);
      patchStatics(value);
      const proxy = new Proxy(value, {
        apply: (f, self, args) => invoke('fn', name, f, self, args),
        construct: (f, args, nt) =>
          nt === proxy ? invoke('new', name, f, undefined, args, f) : Reflect.construct(f, args, nt),
      });
      exported.set(proxy, name);
      exported.set(value, name);
      return proxy;
    }
    register(name, value);
    return value;
  }

  /** Registers an exported object (not re-exported: a `let` binding stays live), so tests may pass it back. */
  function register(name, value) {
    if (value === null || typeof value !== 'object') return;
    exported.set(value, name);
    patchInstance(value);
    if (Object.getPrototypeOf(value) === Object.prototype && !Object.isFrozen(value))
      for (const key of Object.keys(value)) {
        const d = Object.getOwnPropertyDescriptor(value, key);
        if (d?.writable && d.configurable && typeof d.value === 'function')
          Object.defineProperty(value, key, { ...d, value: method('method', key, d.value) });
      }
  }

  return { wrap, register };
}
