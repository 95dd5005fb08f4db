// Time and randomness fixed the same way in recording and replay (see docs/sandbox.md, "Differential
// replay"). Each recorded call carries the clock its test saw when it began (Date.now() and
// performance.now(), real or faked by the test); Math.random() is reseeded with the call's index when
// a call begins, in both runs. The recorder leaves the test's clock alone (a test may fake it); the
// replayer owns the clock: it stands at each call's recorded time from the call's start until the
// next call's. The replacements are installed once and keep their identity, so a target that keeps
// `Date.now` or `Math.random` (a default clock) reads the controlled one later too.

const RealDate = Date;

/** mulberry32: a small, well-spread 32-bit generator. */
function generator(seed) {
  let a = (seed ^ 0x9e3779b9) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function define(obj, key, value) {
  try {
    Object.defineProperty(obj, key, { value, writable: true, configurable: true, enumerable: false });
    return true;
  } catch {
    // A frozen global: the call runs on the real one (a self-replay then shows it is not replayable).
    return false;
  }
}

/** Replaces Math.random for good with a generator; returns reseed(seed). */
export function installRandom() {
  let next = generator(0);
  define(Math, 'random', function random() {
    return next();
  });
  return (seed) => {
    next = generator(seed);
  };
}

/** Replaces Date and performance.now for good with a clock the replayer sets; returns set(t, perf). */
export function installClock() {
  let now = RealDate.now();
  let perf = 0;
  // Named Date, as the real one is (a target may print or compare the name).
  const Controlled = {
    Date: function (...args) {
      if (!new.target) return new RealDate(now).toString();
      return Reflect.construct(
        RealDate,
        args.length === 0 ? [now] : args,
        new.target === Controlled ? RealDate : new.target,
      );
    },
  }.Date;
  Controlled.prototype = RealDate.prototype;
  Controlled.now = function now_() {
    return now;
  };
  Controlled.parse = RealDate.parse;
  Controlled.UTC = RealDate.UTC;
  define(globalThis, 'Date', Controlled);
  if (typeof performance === 'object' && performance)
    define(performance, 'now', function now() {
      return perf;
    });
  return (t, p) => {
    now = t;
    perf = p;
  };
}
