// The canonical codec of the differential replay (see docs/sandbox.md, "Differential replay"): values
// crossing the target module's boundary become JSON-safe trees, and trees become values again. Plain
// JavaScript with no imports: the same file runs inside the box (the recorder and the replayer load a
// copy of it) and on the host (the comparison and the tests).
//
// Tree forms: null, booleans, strings and finite numbers other than -0 stand for themselves; a JSON
// array is an array; everything else is an object tagged by `$`:
//   u undefined · n -0/NaN/±Infinity (v) · big bigint (v) · sym symbol (v, g: registered) · fn function
//   obj plain object (v: sorted own enumerable keys; f: frozen) · inst class instance (c: class, v: state)
//   map (v: entries in order) · set (v: members in order) · date (v: time or null) · re (src, flags)
//   err (c: class, m: message, v: own enumerable state) · ta typed array (c, v) · ab ArrayBuffer (v)
//   promise · cycle (up: levels to the ancestor) · trunc (size cap)
//   ref (an object handed out earlier: c call, or x export of the target, or m module + x its export; p path)
// An `inst` of a class another module of the workspace exports also names it (k: { m, x }): the replay
// rebuilds it from that class's prototype and its own state.
//   opaque (why: a value the replay cannot rebuild)

/** Most nodes one tree may hold; past it a subtree is `{ $: 'trunc' }`. */
export const MAX_NODES = 20000;
const MAX_DEPTH = 64;

const TYPED = [
  'Int8Array',
  'Uint8Array',
  'Uint8ClampedArray',
  'Int16Array',
  'Uint16Array',
  'Int32Array',
  'Uint32Array',
  'Float32Array',
  'Float64Array',
  'BigInt64Array',
  'BigUint64Array',
];

function className(value) {
  try {
    const c = Object.getPrototypeOf(value)?.constructor;
    return typeof c === 'function' && typeof c.name === 'string' ? c.name : '';
  } catch {
    return '';
  }
}

function isPlain(value) {
  const p = Object.getPrototypeOf(value);
  return p === null || p === Object.prototype || className(value) === 'Object';
}

function number(n) {
  if (Object.is(n, -0)) return { $: 'n', v: '-0' };
  if (Number.isNaN(n)) return { $: 'n', v: 'NaN' };
  if (n === Infinity) return { $: 'n', v: 'Infinity' };
  if (n === -Infinity) return { $: 'n', v: '-Infinity' };
  return n;
}

/** Own enumerable string-keyed state, keys sorted; getters on the object itself are read. */
function state(value, walk, path, seg) {
  const out = {};
  for (const k of Object.keys(value).sort()) out[k] = walk(value[k], [...path, `${seg}${k}`]);
  return out;
}

/**
 * Encodes a value as a tree. Options:
 * - ref(obj): a ref node for an object the target handed out earlier (arguments), or undefined;
 * - seen(obj, path): called for every object met at `path` (the recorder's handle table);
 * - klass(ctor): { m, x } when the class is exported by a module the replay can import;
 * - maxNodes: the size cap.
 * Never throws: a property whose getter throws is encoded as `{ $: 'opaque', why }`.
 */
export function encode(value, options = {}) {
  let nodes = 0;
  const max = options.maxNodes ?? MAX_NODES;
  const stack = [];
  const walk = (v, path) => {
    if (++nodes > max) return { $: 'trunc' };
    if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
    if (v === undefined) return { $: 'u' };
    if (typeof v === 'number') return number(v);
    if (typeof v === 'bigint') return { $: 'big', v: v.toString() };
    if (typeof v === 'symbol') {
      const key = Symbol.keyFor(v);
      return key === undefined
        ? { $: 'sym', v: v.description ?? '', g: false }
        : { $: 'sym', v: key, g: true };
    }
    if (stack.length >= MAX_DEPTH) return { $: 'trunc' };
    const up = stack.indexOf(v);
    if (up >= 0) return { $: 'cycle', up: stack.length - up };
    const r = options.ref?.(v);
    if (r) return r;
    if (typeof v === 'function') return { $: 'fn' };
    options.seen?.(v, path);
    stack.push(v);
    try {
      return object(v, path);
    } catch (err) {
      return { $: 'opaque', why: `reading it threw: ${String(err?.message ?? err)}` };
    } finally {
      stack.pop();
    }
  };
  const object = (v, path) => {
    if (Array.isArray(v)) return Array.from(v, (x, i) => walk(x, [...path, `a${i}`]));
    if (v instanceof Error) {
      const s = state(v, walk, path, 'k');
      delete s.stack;
      delete s.message;
      return { $: 'err', c: className(v) || String(v.name), m: String(v.message), v: s };
    }
    if (v instanceof Map)
      return {
        $: 'map',
        v: Array.from(v, ([k, x], i) => [walk(k, [...path, `K${i}`]), walk(x, [...path, `m${i}`])]),
      };
    if (v instanceof Set) return { $: 'set', v: Array.from(v, (x, i) => walk(x, [...path, `s${i}`])) };
    if (v instanceof Date) {
      const t = v.getTime();
      return { $: 'date', v: Number.isNaN(t) ? null : t };
    }
    if (v instanceof RegExp) return { $: 're', src: v.source, flags: v.flags };
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      const c = className(v);
      return { $: 'ta', c, v: Array.from(v, (x) => (typeof x === 'bigint' ? x.toString() : number(x))) };
    }
    if (v instanceof ArrayBuffer) return { $: 'ab', v: Array.from(new Uint8Array(v)) };
    if (typeof v.then === 'function') return { $: 'promise' };
    if (isPlain(v)) {
      const node = { $: 'obj', v: state(v, walk, path, 'k') };
      if (Object.isFrozen(v)) node.f = true;
      return node;
    }
    const node = { $: 'inst', c: className(v), v: state(v, walk, path, 'k') };
    const k = options.klass?.(Object.getPrototypeOf(v)?.constructor);
    if (k) node.k = k;
    if (Object.isFrozen(v)) node.f = true;
    return node;
  };
  return walk(value, []);
}

/** Why a tree cannot be rebuilt into a value by decode(), or null when it can. */
export function unbuildable(tree) {
  if (tree === null || typeof tree !== 'object') return null;
  if (Array.isArray(tree)) {
    for (const t of tree) {
      const why = unbuildable(t);
      if (why) return why;
    }
    return null;
  }
  switch (tree.$) {
    case 'fn':
      return 'a function (callback) is passed';
    case 'inst':
      return tree.k
        ? unbuildable(Object.values(tree.v))
        : `an instance of ${tree.c || 'a class'} no module exports is passed`;
    case 'sym':
      return tree.g ? null : 'a unique symbol is passed';
    case 'promise':
      return 'a promise is passed';
    case 'cycle':
      return 'a cyclic structure is passed';
    case 'trunc':
      return 'an argument is larger than the size cap';
    case 'opaque':
      return tree.why;
    case 'err':
      return 'an error object is passed';
    case 'obj':
      return unbuildable(Object.values(tree.v));
    case 'map':
      return unbuildable(tree.v.flat());
    case 'set':
      return unbuildable(tree.v);
    default:
      return null;
  }
}

function decodeNumber(v) {
  return v === '-0' ? -0 : v === 'NaN' ? Number.NaN : v === 'Infinity' ? Infinity : -Infinity;
}

/**
 * Rebuilds a value from a tree (arguments of a replayed call); `resolve(node)` gives the live object a
 * ref names, or the class an `inst` names (its `k`). Throws for a tree unbuildable() refuses.
 */
export function decode(tree, resolve) {
  const d = (t) => decode(t, resolve);
  if (tree === null || typeof tree !== 'object') return tree;
  if (Array.isArray(tree)) return tree.map(d);
  switch (tree.$) {
    case 'u':
      return undefined;
    case 'n':
      return decodeNumber(tree.v);
    case 'big':
      return BigInt(tree.v);
    case 'sym':
      if (tree.g) return Symbol.for(tree.v);
      break;
    case 'obj':
    case 'inst': {
      if (tree.$ === 'inst' && !tree.k) break;
      const C = tree.$ === 'inst' ? resolve({ $: 'ref', m: tree.k.m, x: tree.k.x, p: [] }) : null;
      if (tree.$ === 'inst' && typeof C !== 'function') break;
      const o = C ? Object.create(C.prototype) : {};
      for (const [k, v] of Object.entries(tree.v))
        Object.defineProperty(o, k, { value: d(v), enumerable: true, writable: true, configurable: true });
      return tree.f ? Object.freeze(o) : o;
    }
    case 'map':
      return new Map(tree.v.map(([k, v]) => [d(k), d(v)]));
    case 'set':
      return new Set(tree.v.map(d));
    case 'date':
      return new Date(tree.v === null ? Number.NaN : tree.v);
    case 're':
      return new RegExp(tree.src, tree.flags);
    case 'ta': {
      const C = globalThis[tree.c];
      if (!TYPED.includes(tree.c) || typeof C !== 'function') break;
      const big = tree.c.startsWith('Big');
      return C.from(tree.v.map((x) => (big ? BigInt(x) : typeof x === 'number' ? x : decodeNumber(x.v))));
    }
    case 'ab':
      return new Uint8Array(tree.v).buffer;
    case 'ref':
      return resolve(tree);
  }
  throw new Error(`cannot rebuild a value from ${JSON.stringify(tree).slice(0, 80)}`);
}

/** The live value at `path` inside `value` (the segments encode() gave to `seen`), or undefined. */
export function at(value, path) {
  let v = value;
  for (const seg of path) {
    if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return undefined;
    const kind = seg[0];
    const rest = seg.slice(1);
    if (kind === 'k' || kind === 'a') v = v[rest];
    else if (kind === 'm' || kind === 'K') {
      const entry = v instanceof Map ? Array.from(v)[Number(rest)] : undefined;
      v = entry?.[kind === 'K' ? 0 : 1];
    } else if (kind === 's') v = v instanceof Set ? Array.from(v)[Number(rest)] : undefined;
    else return undefined;
  }
  return v;
}
