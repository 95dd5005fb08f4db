'use strict';
// Preloaded into every Node process of a box (NODE_OPTIONS `--require`, with `--disable-sigusr1`), before
// any workspace code: no process of a judged run may open an inspector. SIGUSR1 (and
// `process._debugProcess`, which sends it) no longer opens one thanks to `--disable-sigusr1`; this module
// refuses the remaining ways in: an inspector flag given to the process (`--inspect*` in its argv or
// NODE_OPTIONS, the process then exits before running anything), `inspector.open()` / `new Session()`
// (in-process sessions reach the closures of the harness), `process.binding('inspector')` and
// `process._debugProcess` (a process stopping or waking another's debugger). Plain CommonJS: it runs under
// the workspace's own Node.

const INSPECT_FLAG = /^--(?:inspect|debug)(?:-brk|-port|-wait|-publish-uid)?(?:=|$)/;

/** Exits at once when the process was started with an inspector flag (nothing of the run has executed). */
function refuseInspectFlags() {
  const fromEnv = String(process.env.NODE_OPTIONS ?? '').split(/\s+/);
  const flag = [...process.execArgv, ...fromEnv].find((a) => INSPECT_FLAG.test(a));
  if (flag === undefined) return;
  process._rawDebug(`vtnode: ${flag} is refused in a judged run (no process of a box may be debugged)`);
  process.reallyExit(86);
}

function refused(what) {
  const fn = function refusedInJudgedRun() {
    throw new Error(`vtnode: ${what} is refused in a judged run`);
  };
  return fn;
}

/** Replaces `names` of a builtin module's exports with throwing functions, then freezes the exports. */
function disarm(id, names) {
  let mod;
  try {
    mod = require(id);
  } catch {
    return; // a Node built without the inspector has nothing to refuse
  }
  for (const name of names)
    if (name in mod)
      Object.defineProperty(mod, name, {
        value: refused(`${id}.${name}`),
        writable: false,
        configurable: false,
        enumerable: true,
      });
  Object.freeze(mod);
}

/** Locks a property of `process` to `value` (non-writable, non-configurable). */
function lock(name, value) {
  Object.defineProperty(process, name, { value, writable: false, configurable: false, enumerable: false });
}

refuseInspectFlags();
const API = ['open', 'close', 'url', 'waitForDebugger', 'Session', 'Network'];
// inspector/promises is built from inspector's Session when first loaded: it is disarmed first.
disarm('node:inspector/promises', API);
disarm('node:inspector', API);
// ESM imports of node:inspector read the exports as they are now.
require('node:module').syncBuiltinESMExports();
const binding = process.binding;
lock('binding', function guardedBinding(name) {
  if (String(name) === 'inspector') throw new Error("vtnode: process.binding('inspector') is refused");
  return binding.call(process, name);
});
lock('_debugProcess', refused('process._debugProcess'));
lock('_debugEnd', refused('process._debugEnd'));
