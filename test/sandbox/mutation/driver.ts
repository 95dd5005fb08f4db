// Child-process driver of the differential schemata tests (differential.ts): imports each variant
// of a module under the run-time state it asks for and records what the probe's cases return.
// Usage: node driver.ts <spec.json>; prints one JSON document.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface Variant {
  name: string;
  /** Absolute path of the module to import (the same path twice shares one instance). */
  path: string;
  /** `state.active` while the module loads and while each case runs. */
  active: string | null;
}
interface Spec {
  stateKey: string;
  hitLimit: number;
  probe: string;
  variants: Variant[];
}
type Outcome = { value: unknown } | { throws: string; hit: boolean };

const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Spec;
const g = globalThis as Record<string, unknown>;
g[spec.stateKey] ??= {
  active: null,
  cov: Object.create(null),
  hits: 0,
  limit: spec.hitLimit,
  tripped: false,
};
const state = g[spec.stateKey] as { active: string | null; hits: number; limit: number; tripped: boolean };
const reset = (active: string | null) => {
  state.active = active;
  state.hits = 0;
  state.limit = spec.hitLimit;
  state.tripped = false;
};

async function settle(f: () => unknown): Promise<Outcome> {
  try {
    return { value: await f() };
  } catch (err) {
    const e = err as Error;
    return {
      throws: e?.constructor?.name ?? typeof err,
      hit: String(e?.message).includes('VTNODE_HIT_LIMIT'),
    };
  }
}

const { cases } = (await import(pathToFileURL(spec.probe).href)) as {
  cases: [string, (mod: Record<string, unknown>) => unknown][];
};
const out: Record<string, Record<string, Outcome> | { importError: string }> = {};
for (const v of spec.variants) {
  reset(v.active);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(v.path).href)) as Record<string, unknown>;
  } catch (err) {
    out[v.name] = { importError: (err as Error)?.constructor?.name ?? 'unknown' };
    continue;
  }
  const results: Record<string, Outcome> = {};
  for (const [name, run] of cases) {
    reset(v.active);
    results[name] = await settle(() => run(mod));
  }
  out[v.name] = results;
}
// JSON loses these distinctions; a mutant may be visible only through them.
const replacer = (_k: string, x: unknown) => {
  if (typeof x === 'bigint') return `${x}n`;
  if (typeof x === 'number' && (!Number.isFinite(x) || Object.is(x, -0)))
    return `<${Object.is(x, -0) ? '-0' : x}>`;
  if (x === undefined) return '<undefined>';
  return typeof x === 'function' ? '<function>' : x;
};
process.stdout.write(JSON.stringify(out, replacer));
