'use strict';
// (CommonJS: jest loads it through its own module registry, mocha through require; ESM imports it too.)
// Hardens the JavaScript intrinsics a test runner and its matchers rely on, inside a judged test process,
// before any workspace module (and so the candidate) loads. Plain JavaScript: it runs under the
// workspace's own Node and runner, wherever vtnode is installed.
//
// Hand-written rather than SES `lockdown()`: lockdown also tames Date, Math.random, Error stacks and
// removes non-standard properties, which breaks the runners and the tests it must leave untouched (fake
// timers replace globalThis.Date, tests spy on Math.random and console). This module freezes only what a
// verdict depends on: the properties of Object, Function, Array, Reflect, JSON, Promise, the collections,
// the primitives' wrappers, RegExp, Error and the iterator/generator prototypes, and the global bindings
// of those constructors, which stay assignable but record who assigned them (see guardBinding). New
// properties may still be added (should.js and chai.should() extend Object.prototype); existing ones can
// no longer be replaced or redefined.
//
// The "override mistake": a frozen `Error.prototype.name` would make `this.name = 'X'` in a custom error
// class throw, and a frozen `Date.now` would make `ClockDate.now = ...` throw in a subclass (fake timers
// do exactly that). Function-valued properties, and well-known names of prototypes, therefore become
// non-configurable accessors whose setter refuses writes to the frozen object itself but defines an own
// property on any other receiver (the instance, the subclass), as a writable data property would.

const ROOT_NAMES = [
  'Object',
  'Function',
  'Array',
  'Reflect',
  'JSON',
  'Promise',
  'Map',
  'Set',
  'WeakMap',
  'WeakSet',
  'WeakRef',
  'String',
  'Number',
  'Boolean',
  'Symbol',
  'BigInt',
  'RegExp',
  'Error',
  'TypeError',
  'RangeError',
  'SyntaxError',
  'ReferenceError',
  'EvalError',
  'URIError',
  'AggregateError',
  'ArrayBuffer',
  'DataView',
  'Proxy',
  'Iterator',
];

/** Data properties that tools legitimately assign: left writable (but made non-configurable). */
const WRITABLE = { Error: ['stackTraceLimit', 'prepareStackTrace'] };

/** Inherited names instances commonly assign themselves (`this.name = ...`, `obj.toString = ...`). */
const OVERRIDABLE = new Set([
  'constructor',
  'name',
  'message',
  'toString',
  'toLocaleString',
  'valueOf',
  'toJSON',
  'then',
  'catch',
  'finally',
]);

const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const defineProperty = Object.defineProperty;
const ownKeys = Reflect.ownKeys;
const getPrototypeOf = Object.getPrototypeOf;
const freeze = Object.freeze;
const pristineIs = Object.is;

/** Pristine references the harness uses after the candidate loaded. */
const pristine = Object.freeze({
  is: Object.is,
  keys: Object.keys,
  getPrototypeOf,
  getOwnPropertyDescriptor,
  defineProperty,
  ownKeys,
  stringify: JSON.stringify,
  fnToString: Function.prototype.toString,
  call: Function.prototype.call,
  apply: Reflect.apply,
  errorCtor: Error,
});

const STATE = Symbol.for('vtnode.integrity.hardened');
/** Where a realm keeps the reader of its global-binding writes (a frozen function, non-configurable). */
const BINDINGS = Symbol.for('vtnode.integrity.bindings');
/** This module's folder: its frames are never the writer. (Evaluated in another realm, it has no file.) */
const HARNESS_DIR =
  typeof __filename === 'string' ? __filename.slice(0, __filename.lastIndexOf('/') + 1) : null;
const MAX_WRITES = 50;

/**
 * The V8 call sites above `above` (the function calling this one excluded). Error's two slots are
 * writable (tools assign them) but not configurable: they are set for one capture and put back,
 * whatever the candidate assigned.
 */
function callSites(above) {
  const prepare = Error.prepareStackTrace;
  const limit = Error.stackTraceLimit;
  Error.prepareStackTrace = (_e, sites) => sites;
  Error.stackTraceLimit = 40;
  try {
    const holder = {};
    Error.captureStackTrace(holder, above);
    return holder.stack;
  } finally {
    Error.prepareStackTrace = prepare;
    Error.stackTraceLimit = limit;
  }
}

/**
 * The file of the code writing a global binding: the first frame that is not the harness, relative to
 * the folder the run started in (the box's copy of the workspace, the same in the reference's run).
 */
function writerFile(cwd) {
  const sites = callSites(writerFile);
  if (!Array.isArray(sites)) return '<unknown>';
  for (const site of sites) {
    if (site.isEval?.()) return '<eval>';
    let file = site.getFileName?.() ?? null;
    if (!file) continue;
    if (file.startsWith('file://')) file = decodeURIComponent(file.slice('file://'.length));
    if (HARNESS_DIR && file.startsWith(HARNESS_DIR)) continue;
    return cwd && file.startsWith(cwd) ? file.slice(cwd.length) : file;
  }
  return '<unknown>';
}

/**
 * Makes a global binding (`globalThis.AggregateError`) a non-configurable accessor that lets every
 * write through and records who made it. A repository's own tests may replace a global (a polyfill
 * test sets `globalThis.AggregateError = undefined`); the sentinel compares the writers with the
 * reference run's, so a write the candidate adds is a tamper, whenever it happens and whatever it
 * restores after.
 */
function guardBinding(name, d, writes, cwd) {
  let current = d.value;
  const accessor = {
    get() {
      return current;
    },
    set(next) {
      if (writes.length < MAX_WRITES) writes.push(`${name}@${writerFile(cwd)}`);
      current = next;
    },
  };
  freeze(accessor.get);
  freeze(accessor.set);
  defineProperty(globalThis, name, { ...accessor, enumerable: d.enumerable, configurable: false });
}

function isObject(v) {
  return (typeof v === 'object' && v !== null) || typeof v === 'function';
}

/** Replaces a data property of a prototype with an override-safe accessor. */
function accessorFor(owner, key, d, label) {
  const value = d.value;
  const accessor = {
    get() {
      return value;
    },
    set(next) {
      // Writing back the same value changes nothing (fake timers copy Date.prototype's methods onto
      // their ClockDate, whose prototype is Date.prototype itself): allowed.
      if (this === owner && pristineIs(next, value)) return;
      if (this === owner) throw new TypeError(`vtnode: ${label}.${String(key)} is frozen for the judged run`);
      defineProperty(this, key, { value: next, writable: true, enumerable: true, configurable: true });
    },
  };
  // Frozen, so a later walk (another realm sharing this object: jest's contexts share the main realm's
  // ArrayBuffer and typed arrays) finds nothing to tame in them; tamed again, each walk would double them.
  freeze(accessor.get);
  freeze(accessor.set);
  defineProperty(owner, key, { ...accessor, enumerable: d.enumerable, configurable: false });
}

function freezeProperty(owner, key, d, label, isPrototype, keepWritable) {
  if ('value' in d) {
    if (!d.configurable && !d.writable) return d.value;
    if (keepWritable) {
      if (d.configurable) defineProperty(owner, key, { configurable: false });
      return d.value;
    }
    const tame = typeof d.value === 'function' || (isPrototype && OVERRIDABLE.has(key));
    if (tame && d.configurable) accessorFor(owner, key, d, label);
    else if (d.configurable) defineProperty(owner, key, { writable: false, configurable: false });
    else defineProperty(owner, key, { writable: false });
    return d.value;
  }
  if (d.configurable) defineProperty(owner, key, { configurable: false });
  return null;
}

/** Freezes the existing properties of `obj` and, recursively, of what they hold. Returns the count. */
function hardenTree(obj, label, seen, writable) {
  if (!isObject(obj) || seen.has(obj)) return 0;
  seen.add(obj);
  const isPrototype = /(?:^|\.)prototype$|\[\[Prototype\]\]$/.test(label);
  // By label from the roots; by identity when another walk reaches the object (node:assert's
  // AssertionError leads to Error: its prepareStackTrace must stay writable there too).
  const keep = writable[label] ?? (obj === Error ? WRITABLE.Error : []);
  let n = 0;
  for (const key of ownKeys(obj)) {
    const d = getOwnPropertyDescriptor(obj, key);
    if (!d) continue;
    const child = freezeProperty(obj, key, d, label, isPrototype, keep.includes(key));
    n++;
    if (child !== null) n += hardenTree(child, `${label}.${String(key)}`, seen, writable);
    else {
      n += hardenTree(d.get, label, seen, writable);
      n += hardenTree(d.set, label, seen, writable);
    }
  }
  n += hardenTree(getPrototypeOf(obj), `${label}.[[Prototype]]`, seen, writable);
  return n;
}

/** Hidden intrinsics reachable only through instances. */
function hiddenIntrinsics() {
  return {
    TypedArray: getPrototypeOf(Uint8Array),
    'Date.prototype': Date.prototype,
    ArrayIteratorPrototype: getPrototypeOf([][Symbol.iterator]()),
    MapIteratorPrototype: getPrototypeOf(new Map()[Symbol.iterator]()),
    SetIteratorPrototype: getPrototypeOf(new Set()[Symbol.iterator]()),
    StringIteratorPrototype: getPrototypeOf(''[Symbol.iterator]()),
    RegExpStringIteratorPrototype: getPrototypeOf(/a/g[Symbol.matchAll]('a')),
    GeneratorFunction: getPrototypeOf(function* () {}),
    AsyncFunction: getPrototypeOf(async () => {}),
    AsyncGeneratorFunction: getPrototypeOf(async function* () {}),
  };
}

/**
 * Hardens the intrinsics once per realm (later calls are no-ops) and returns how many properties were
 * frozen. The global bindings of the hardened constructors record their writers (guardBinding);
 * `guardBindings: false` freezes them as data properties instead (jest's context global refuses the
 * non-configurable accessors guardBinding defines).
 */
function hardenIntrinsics({ guardBindings = true } = {}) {
  if (globalThis[STATE]) return 0;
  const seen = new WeakSet();
  const writes = [];
  const cwd = typeof process === 'object' && typeof process?.cwd === 'function' ? `${process.cwd()}/` : '';
  let n = 0;
  for (const name of ROOT_NAMES) {
    const value = globalThis[name];
    if (value === undefined) continue;
    n += hardenTree(value, name, seen, WRITABLE);
    const g = getOwnPropertyDescriptor(globalThis, name);
    // A full descriptor: a vm context's global (jest's environments) redefines what a partial one omits.
    if (!g?.configurable || !('value' in g)) continue;
    if (guardBindings) guardBinding(name, g, writes, cwd);
    else
      defineProperty(globalThis, name, {
        value: g.value,
        writable: false,
        enumerable: g.enumerable,
        configurable: false,
      });
  }
  const read = () => writes.slice();
  freeze(read);
  defineProperty(globalThis, BINDINGS, {
    value: read,
    enumerable: false,
    writable: false,
    configurable: false,
  });
  for (const [label, value] of Object.entries(hiddenIntrinsics())) n += hardenTree(value, label, seen, {});
  defineProperty(globalThis, STATE, { value: true, enumerable: false, writable: false, configurable: false });
  return n;
}

/** Freezes the properties of a module's exports (node:assert, node:test): they cannot be replaced. */
function freezeExports(moduleObject, label) {
  return hardenTree(moduleObject, label, new WeakSet(), {});
}

const CHANNELS = Symbol.for('vtnode.integrity.channels');
const OBJECT_PROTO = Object.prototype;
const FUNCTION_PROTO = Function.prototype;

/**
 * Makes the function-valued properties of `obj` and of its prototype chain (up to Object.prototype)
 * override-safe accessors: replacing one on the object itself throws, an instance or subclass may still
 * define its own. Data that is not a function (flags, counters the runtime assigns) stays as it is. Each
 * object of the chain also gets the methods it inherits as accessors of its own, so a method cannot be
 * shadowed on a prototype between (`Pipe.prototype.writeBuffer = f` over LibuvStreamWrap's).
 */
function freezeMethods(obj, label, seen) {
  const chain = [];
  for (let o = obj; isObject(o) && o !== OBJECT_PROTO && o !== FUNCTION_PROTO; o = getPrototypeOf(o))
    chain.push(o);
  const inherited = new Map();
  let n = 0;
  for (let i = chain.length - 1; i >= 0; i--) {
    const o = chain[i];
    const fresh = !seen.has(o);
    seen.add(o);
    for (const key of ownKeys(o)) {
      const d = getOwnPropertyDescriptor(o, key);
      if (d && 'value' in d && typeof d.value === 'function') inherited.set(key, d.value);
      else if (d?.get && !d.configurable && inherited.has(key)) inherited.set(key, d.get.call(o));
      if (!fresh || !d?.configurable || !('value' in d) || typeof d.value !== 'function') continue;
      accessorFor(o, key, d, label);
      n++;
    }
    // Names this object inherits: an own accessor of the same value, so assigning here throws too.
    for (const [key, value] of inherited) {
      if (getOwnPropertyDescriptor(o, key)) continue;
      if (!Reflect.isExtensible(o)) continue;
      accessorFor(o, key, { value, enumerable: false, configurable: true, writable: true }, label);
      n++;
    }
  }
  return n;
}

/** Native handle classes (by process.binding module) whose prototypes write a stream's bytes. */
const BINDINGS_WRITING = [
  ['pipe_wrap', ['Pipe']],
  ['stream_wrap', ['LibuvStreamWrap', 'WriteWrap', 'ShutdownWrap']],
  ['tty_wrap', ['TTY']],
  ['tcp_wrap', ['TCP']],
];

/** A function that refuses: what the heap-snapshot APIs become in a judged test process. */
function refused(name) {
  const f = () => {
    throw new Error(`vtnode: ${name} is not available in a judged test process`);
  };
  freeze(f);
  return f;
}

/**
 * Freezes what carries a test process's results to its runner, in the process the candidate will run in,
 * before the candidate loads: the IPC send primitives (process.send and process._send, the channel and
 * its handle's write methods), the serializers they use (node:v8's Serializer, Buffer), worker_threads'
 * message ports (vitest's threads pool, jest's worker threads), and the event and stream prototypes the
 * runners' messages travel through. The heap-snapshot APIs are refused (a snapshot would show the
 * harness's state). `proc` is the real process object (a jest context's `process` is a copy), `load`
 * a function that returns a builtin module; `stdout: true` also freezes the methods of process.stdout
 * itself (node:test's child processes report on it). Once per process; returns how many it froze.
 */
function freezeChannels(proc, load, { stdout = false } = {}) {
  if (!isObject(proc) || proc[CHANNELS]) return 0;
  defineProperty(proc, CHANNELS, { value: true, enumerable: false, writable: false, configurable: false });
  const seen = new WeakSet();
  let n = 0;
  const v8 = load('node:v8');
  for (const name of ['getHeapSnapshot', 'writeHeapSnapshot', 'setHeapSnapshotNearHeapLimit'])
    if (typeof v8[name] === 'function') {
      const d = getOwnPropertyDescriptor(v8, name);
      if (d?.configurable) defineProperty(v8, name, { ...d, value: refused(`v8.${name}`) });
    }
  for (const name of ['send', '_send', 'disconnect', '_disconnect']) {
    const d = getOwnPropertyDescriptor(proc, name);
    if (d?.configurable && typeof d.value === 'function') {
      accessorFor(proc, name, d, 'process');
      n++;
    }
  }
  const channel = proc.channel;
  if (isObject(channel)) {
    n += freezeMethods(channel, 'process.channel', seen);
    // The channel's handle (kept under a symbol) and its write methods (writeBuffer, writeUtf8String).
    for (const key of ownKeys(channel)) {
      const d = getOwnPropertyDescriptor(channel, key);
      if (d && 'value' in d && isObject(d.value)) n += freezeMethods(d.value, 'process.channel handle', seen);
    }
  }
  // The native stream handles (the IPC pipe, stdout's pipe or tty) write through these prototypes, which
  // process.binding still hands out.
  for (const [binding, names] of BINDINGS_WRITING) {
    let b = null;
    try {
      b = typeof proc.binding === 'function' ? proc.binding(binding) : null;
    } catch {
      b = null;
    }
    for (const name of names)
      if (typeof b?.[name] === 'function') n += freezeMethods(b[name].prototype, `${binding}.${name}`, seen);
  }
  n += freezeMethods(v8, 'node:v8', seen);
  for (const name of ['Serializer', 'DefaultSerializer', 'Deserializer', 'DefaultDeserializer'])
    if (typeof v8[name] === 'function') n += freezeMethods(v8[name].prototype, `v8.${name}`, seen);
  const { Buffer } = load('node:buffer');
  n += freezeMethods(Buffer.prototype, 'Buffer.prototype', seen);
  for (const name of ['alloc', 'allocUnsafe', 'allocUnsafeSlow', 'from', 'concat', 'byteLength'])
    n += freezeStatic(Buffer, name, 'Buffer');
  const threads = load('node:worker_threads');
  for (const name of ['MessagePort', 'BroadcastChannel', 'MessageChannel', 'Worker'])
    if (typeof threads[name] === 'function') n += freezeMethods(threads[name].prototype, name, seen);
  if (isObject(threads.parentPort)) n += freezeMethods(threads.parentPort, 'parentPort', seen);
  n += freezeMethods(load('node:events').EventEmitter.prototype, 'EventEmitter.prototype', seen);
  const stream = load('node:stream');
  for (const name of ['Readable', 'Writable', 'Duplex', 'Transform'])
    n += freezeMethods(stream[name].prototype, `stream.${name}`, seen);
  n += freezeMethods(load('node:net').Socket.prototype, 'net.Socket', seen);
  if (stdout && isObject(proc.stdout)) n += freezeMethods(proc.stdout, 'process.stdout', seen);
  load('node:module').syncBuiltinESMExports();
  return n;
}

/** Freezes one function-valued static of a constructor. */
function freezeStatic(ctor, name, label) {
  const d = getOwnPropertyDescriptor(ctor, name);
  if (!d?.configurable || typeof d.value !== 'function') return 0;
  accessorFor(ctor, name, d, label);
  return 1;
}

/** The reader of this realm's global-binding writes (`name@file` each), or null before hardening. */
function bindingWrites(realm = globalThis) {
  const read = realm[BINDINGS];
  return typeof read === 'function' ? read : null;
}

// A literal object (Node's ESM import of a CommonJS module reads its names from it), then frozen: a
// candidate that requires this module cannot swap what the sentinels call.
module.exports = { pristine, hardenIntrinsics, freezeExports, freezeChannels, bindingWrites, callSites };
freeze(module.exports);
