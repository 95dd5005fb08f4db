// The replayer of the differential replay: run in a box that holds the candidate and no test file. It
// performs the recorded calls of one test file in order against the target's module namespace, with the
// same pinned clock and random numbers as the recording, and writes only the candidate's outputs; the
// host compares them with the reference's (sandbox/replay/compare.ts). A call whose inputs name an
// object an earlier call handed out gets the candidate's object at the same place.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { at, decode, encode } from './codec.mjs';
import { installClock, installRandom } from './determinism.mjs';

const DIR = dirname(fileURLToPath(import.meta.url));
// Installed when this module loads: the replay file imports it before the target.
const setClock = installClock();
const reseed = installRandom();

/** How long a returned promise may take to settle before it is reported pending, ms. */
const SETTLE_MS = 2000;

function perform(call, ns, modules, self, args) {
  const owner = call.m === undefined ? ns : modules[call.m];
  switch (call.kind) {
    case 'fn':
      return Reflect.apply(owner[call.name], undefined, args);
    case 'new':
      return Reflect.construct(owner[call.name], args);
    case 'get':
      return self[call.name];
    default:
      return Reflect.apply(self[call.name], self, args);
  }
}

function settle(promise) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ pending: true }), SETTLE_MS);
    Promise.resolve(promise).then(
      (v) => {
        clearTimeout(timer);
        resolve({ ok: v });
      },
      (e) => {
        clearTimeout(timer);
        resolve({ err: e });
      },
    );
  });
}

/**
 * Replays the calls of script `n` (`script-<n>.json` next to this module: { calls: [...] }) against
 * `ns` and writes { v: 1, calls: [{ i, out, after, selfAfter, settled }] } to `out-<n>.json`.
 */
export async function replay(n, ns, modules = {}) {
  const script = JSON.parse(readFileSync(join(DIR, `script-${n}.json`), 'utf8'));
  const outPath = join(DIR, `out-${n}.json`);
  const live = new Map();
  const refs = new WeakMap();
  const key = (c, p) => `${c}\u0000${p.join('\u0000')}`;
  const resolve = (r) => {
    let v;
    if (r.m !== undefined) v = at(modules[r.m]?.[r.x], r.p);
    else if (r.x !== undefined) v = at(ns[r.x], r.p);
    else if (live.has(key(r.c, r.p))) v = live.get(key(r.c, r.p));
    else throw new Error(`no object at call ${r.c} ${r.p.join('.')}`);
    if (v !== null && (typeof v === 'object' || typeof v === 'function')) refs.set(v, r);
    return v;
  };
  const outs = [];
  for (const call of script.calls) {
    const o = { i: call.i };
    outs.push(o);
    if (call.skip) {
      o.skipped = true;
      continue;
    }
    let args;
    let self;
    try {
      args = call.args.map((a) => decode(a, resolve));
      self = call.self ? decode(call.self, resolve) : undefined;
    } catch (err) {
      o.unresolved = String(err?.message ?? err);
      continue;
    }
    setClock(call.t, call.pn);
    reseed(call.i);
    let result;
    let threw = false;
    try {
      result = perform(call, ns, modules, self, args);
    } catch (err) {
      threw = true;
      result = err;
    }
    const ref = (v) => refs.get(v);
    o.out = { [threw ? 't' : 'r']: encode(result) };
    o.after = args.map((a) => encode(a, { ref }));
    if (call.self?.$ === 'ref') o.selfAfter = encode(self);
    for (const p of call.anchors ?? []) if (p[0] !== 'P') live.set(key(call.i, p), at(result, p));
    if (!threw && result !== null && typeof result === 'object' && typeof result.then === 'function') {
      const s = await settle(result);
      if (s.pending) o.settled = { pending: true };
      else {
        const value = 'ok' in s ? s.ok : s.err;
        o.settled = { ['ok' in s ? 'ok' : 'err']: encode(value) };
        for (const p of call.anchors ?? []) if (p[0] === 'P') live.set(key(call.i, p), at(value, p.slice(1)));
      }
    }
  }
  writeFileSync(outPath, JSON.stringify({ v: 1, calls: outs }));
}
