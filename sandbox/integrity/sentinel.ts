import { z } from 'zod';
import type { TestCase, Verdict } from '../judges/verdict.ts';

/** Must match sandbox/integrity/record.mjs. */
export const SENTINEL_NAME = 'vtnode:sentinel';
export const SENTINEL_PREFIX = 'vtnode-sentinel:';

/** What the sentinel test of one judged file reported (record.mjs `reportSentinel`). */
export const SentinelState = z.object({
  v: z.literal(1),
  runner: z.string(),
  /** Each canary: `ok` (behaved), `passed` (a must-fail assertion passed), or `threw: …`. */
  canaries: z.record(z.string(), z.string()),
  /** Matcher-table entries the file's imports replaced or added (the reference's are legitimate). */
  importChanges: z.array(z.string()),
  /** Entries replaced or added after the imports (while tests ran). */
  runChanges: z.array(z.string()),
  testers: z.number().int(),
  testersAfter: z.number().int(),
  /** Writes to the runner's task state by code that may not make them. */
  violations: z.array(z.string()),
  /** Writes to the hardened constructors' global bindings, `name@writer file` (harden.cjs guardBinding). */
  globals: z.array(z.string()).max(200),
  /** Mutation/coverage state of an instrumented target (mutation runs), or null. */
  mutation: z
    .object({
      active: z.union([z.string(), z.number()]).nullable(),
      hits: z.number(),
      limitHit: z.boolean(),
      cov: z.unknown(),
    })
    .nullable(),
});
export type SentinelState = z.infer<typeof SentinelState>;

/** Per judged file: the sentinel's state, or why it is unusable. */
export type SentinelReading = { ok: true; state: SentinelState } | { ok: false; problem: string };

/** The verdict without the sentinel cases, and what each file's sentinel said. */
export interface SplitVerdict {
  verdict: Verdict;
  sentinels: Map<string, SentinelReading>;
}

function readSentinel(c: TestCase): SentinelReading {
  if (c.status !== 'failed') return { ok: false, problem: `the sentinel test was reported ${c.status}` };
  const at = c.message?.indexOf(SENTINEL_PREFIX) ?? -1;
  if (at < 0) return { ok: false, problem: 'the sentinel failed without its report' };
  let raw: unknown;
  try {
    raw = JSON.parse(c.message!.slice(at + SENTINEL_PREFIX.length));
  } catch {
    return { ok: false, problem: 'the sentinel report is not JSON' };
  }
  const parsed = SentinelState.safeParse(raw);
  if (!parsed.success)
    return {
      ok: false,
      problem: `the sentinel report is malformed (${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message})`,
    };
  return { ok: true, state: parsed.data };
}

/**
 * Takes the sentinel cases out of a verdict: one per judged file is expected, failed on purpose with its
 * state in the message. The sentinels' failures stay counted for the exit-code agreement (the runner
 * must exit non-zero), so call this after checking it.
 */
export function splitSentinels(verdict: Verdict, judgedFiles: readonly string[]): SplitVerdict {
  const sentinels = new Map<string, SentinelReading>();
  const cases: TestCase[] = [];
  for (const c of verdict.cases) {
    // mocha's sentinel is a test in a suite of the same name.
    if (c.name !== SENTINEL_NAME && c.name !== `${SENTINEL_NAME} > ${SENTINEL_NAME}`) {
      cases.push(c);
      continue;
    }
    sentinels.set(
      c.file,
      sentinels.has(c.file) ? { ok: false, problem: 'the sentinel test appears twice' } : readSentinel(c),
    );
  }
  for (const f of judgedFiles)
    if (!sentinels.has(f)) sentinels.set(f, { ok: false, problem: 'the sentinel test did not run' });
  return { verdict: { cases, errors: verdict.errors }, sentinels };
}

const sameSet = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && [...a].sort().every((x, i) => x === [...b].sort()[i]);

/** Problems of one file's sentinel, judged against the same file's sentinel in the reference run. */
export function sentinelProblems(
  file: string,
  got: SentinelReading,
  reference: SentinelReading | undefined,
): string[] {
  if (!got.ok) return [`tamper: ${file}: ${got.problem}`];
  const s = got.state;
  const out: string[] = [];
  const bad = Object.entries(s.canaries).filter(([, r]) => r !== 'ok');
  for (const [name, r] of bad.slice(0, 5))
    out.push(
      `tamper: ${file}: canary ${name} ${r === 'passed' ? 'passed (a failing assertion was believed)' : r}`,
    );
  for (const v of s.violations.slice(0, 5)) out.push(`tamper: ${file}: ${v}`);
  if (reference?.ok) {
    const r = reference.state;
    if (!sameSet(s.importChanges, r.importChanges))
      out.push(
        `tamper: ${file}: the matchers were changed at import (${diff(s.importChanges, r.importChanges)})`,
      );
    if (!sameSet(s.runChanges, r.runChanges))
      out.push(
        `tamper: ${file}: the matchers were changed while tests ran (${diff(s.runChanges, r.runChanges)})`,
      );
    const globals = [...new Set(s.globals)];
    const refGlobals = [...new Set(r.globals)];
    if (!sameSet(globals, refGlobals))
      out.push(`tamper: ${file}: a global was replaced (${diff(globals, refGlobals)})`);
    if (s.testers !== r.testers || s.testersAfter !== r.testersAfter)
      out.push(
        `tamper: ${file}: equality testers were added (${s.testersAfter} vs ${r.testersAfter} in the reference)`,
      );
  }
  return out;
}

function diff(got: readonly string[], ref: readonly string[]): string {
  const extra = got.filter((x) => !ref.includes(x));
  const missing = ref.filter((x) => !got.includes(x));
  return [...extra.map((x) => `+${x}`), ...missing.map((x) => `-${x}`)].slice(0, 6).join(', ');
}
