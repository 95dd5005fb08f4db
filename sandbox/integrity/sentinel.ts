import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import { z } from 'zod';
import type { TestCase, Verdict } from '../judges/verdict.ts';

/** The environment variable that carries the run's sentinel key into the box (record.cjs KEY_VARIABLE). */
export const SENTINEL_KEY_VARIABLE = 'VTNODE_SENTINEL_KEY';

/**
 * What the test process saw of its file's tests (vitest, jest): the host holds the report to it, so a
 * result rewritten between the test process and the report (the IPC path, the runner's main process)
 * shows. `failedNames` are the first 16 hex digits of the SHA-256 of each failed test's report name.
 */
export const SentinelOutcomes = z.object({
  passed: z.number().int().nonnegative(),
  pending: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  failedNames: z.array(z.string().regex(/^[0-9a-f]{16}$/)).max(2000),
});
export type SentinelOutcomes = z.infer<typeof SentinelOutcomes>;

/** Must match sandbox/integrity/record.cjs. */
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
  /** Absolute path of the judged file whose sentinel this is (part of what the seal covers). */
  file: z.string(),
  /** What the test process saw of the file's tests (runners whose tests run apart from the report). */
  outcomes: SentinelOutcomes.optional(),
});
export type SentinelState = z.infer<typeof SentinelState>;

/** How the sentinels of one run are authenticated: the run's key and the box the paths are in. */
export interface SentinelSeal {
  /** The run's key (32 bytes) the harness seals each report with. */
  key: Buffer;
  /** Absolute path of the box: a sentinel must name its own file in it. */
  box: string;
}

/** The seal record.cjs computes: HMAC-SHA256 of `file`, a newline and the report's JSON text. */
export function sealOf(key: Buffer, file: string, text: string): string {
  return createHmac('sha256', key).update(`${file}\n${text}`).digest('hex');
}

/** The digest a sentinel names a test by (record.cjs nameDigest). */
export function nameDigest(name: string): string {
  return createHash('sha256').update(name).digest('hex').slice(0, 16);
}

/** Per judged file: the sentinel's state, or why it is unusable. */
export type SentinelReading = { ok: true; state: SentinelState } | { ok: false; problem: string };

/** The verdict without the sentinel cases, and what each file's sentinel said. */
export interface SplitVerdict {
  verdict: Verdict;
  sentinels: Map<string, SentinelReading>;
}

/** Checks the seal of a sentinel's report (`text`) and that it names the file it was read from. */
function sealProblem(
  c: TestCase,
  seal: SentinelSeal,
  mac: string,
  text: string,
  file: string,
): string | null {
  if (file !== join(seal.box, c.file)) return 'the sentinel report names another file';
  const want = Buffer.from(sealOf(seal.key, file, text), 'hex');
  const got = /^[0-9a-f]{64}$/.test(mac) ? Buffer.from(mac, 'hex') : Buffer.alloc(0);
  if (got.length !== want.length || !timingSafeEqual(got, want))
    return "the sentinel report's seal does not verify (it was altered or forged)";
  return null;
}

function readSentinel(c: TestCase, seal: SentinelSeal | null): SentinelReading {
  if (c.status !== 'failed') return { ok: false, problem: `the sentinel test was reported ${c.status}` };
  const at = c.message?.indexOf(SENTINEL_PREFIX) ?? -1;
  if (at < 0) return { ok: false, problem: 'the sentinel failed without its report' };
  const body = c.message!.slice(at + SENTINEL_PREFIX.length);
  const colon = body.indexOf(':');
  const mac = colon < 0 ? '' : body.slice(0, colon);
  const text = body.slice(colon + 1);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'the sentinel report is not JSON' };
  }
  const parsed = SentinelState.safeParse(raw);
  if (!parsed.success)
    return {
      ok: false,
      problem: `the sentinel report is malformed (${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message})`,
    };
  const problem = seal ? sealProblem(c, seal, mac, text, parsed.data.file) : null;
  return problem ? { ok: false, problem } : { ok: true, state: parsed.data };
}

/**
 * How the report's cases of one file disagree with what its test process saw, or null: a test the
 * process saw fail must not be reported otherwise, and no more tests may be reported passed than passed
 * or were still running when the sentinel looked.
 */
export function outcomeProblem(seen: SentinelOutcomes, cases: readonly TestCase[]): string | null {
  const failed = new Map<string, number>();
  let passed = 0;
  for (const c of cases) {
    if (c.status === 'passed') passed++;
    if (c.status !== 'failed') continue;
    const d = nameDigest(c.name);
    failed.set(d, (failed.get(d) ?? 0) + 1);
  }
  let unreported = 0;
  for (const d of seen.failedNames) {
    const n = failed.get(d) ?? 0;
    if (n === 0) unreported++;
    else failed.set(d, n - 1);
  }
  if (unreported > 0)
    return `the report differs from the test process: ${unreported} test(s) it saw fail are not reported failed`;
  if (passed > seen.passed + seen.pending)
    return `the report differs from the test process: ${passed} test(s) reported passed, ${seen.passed} passed there (${seen.pending} unfinished)`;
  return null;
}

/**
 * Takes the sentinel cases out of a verdict: one per judged file is expected, failed on purpose with its
 * state in the message. The sentinels' failures stay counted for the exit-code agreement (the runner
 * must exit non-zero), so call this after checking it.
 */
export function splitSentinels(
  verdict: Verdict,
  judgedFiles: readonly string[],
  seal: SentinelSeal | null = null,
): SplitVerdict {
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
      sentinels.has(c.file)
        ? { ok: false, problem: 'the sentinel test appears twice' }
        : readSentinel(c, seal),
    );
  }
  for (const f of judgedFiles)
    if (!sentinels.has(f)) sentinels.set(f, { ok: false, problem: 'the sentinel test did not run' });
  for (const [file, reading] of sentinels) {
    if (!reading.ok || !reading.state.outcomes) continue;
    const problem = outcomeProblem(
      reading.state.outcomes,
      cases.filter((c) => c.file === file),
    );
    if (problem) sentinels.set(file, { ok: false, problem });
  }
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
