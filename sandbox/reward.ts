/** Everything the reward depends on; produced by the scorer, judged here without I/O. */
export interface RewardInput {
  /** `file`: the candidate is a source file; `tests`: the candidate is a test file. */
  kind: 'file' | 'tests';
  /** The model stopped at its length limit: the candidate is incomplete. */
  truncated: boolean;
  /**
   * Why the run itself is void by the candidate's doing (CPU budget, memory, output cap, survivors,
   * missing or malformed report), if it is. Infrastructure failures never reach the reward.
   */
  runFailures: string[];
  /** Disagreements of the verdict with the exit code or with the reference's inventory. */
  verdictReasons: string[];
  /** Test cases that passed (expected failures that failed as declared included). */
  passed: number;
  /** Test cases that failed. Skipped and todo cases count in neither. */
  failed: number;
  /** Strict type-check in a fresh box: run only when the candidate could earn a positive reward. */
  typecheck: 'passed' | 'failed' | 'not-configured' | 'not-run';
  /**
   * How the target's exported API (read by the type-check service) differs from the reference's: an
   * export lost, its kind, arity or annotated types changed, or `any` brought in (however spelt).
   */
  apiDifferences?: string[];
  /** Tamper patterns the candidate adds over the original. */
  tamper: { name: string; added: number; examples?: string[] }[];
  /** Convention lints the candidate adds over the original. */
  lints: { name: string; added: number }[];
  /**
   * `tests` tasks: the strength of the candidate's tests (sandbox/strength.ts): how many of the mutants the
   * original tests kill it kills too, and how many of the functions the original tests enter it enters.
   */
  strength?: { killed: number; of: number; covered: number; ofCovered: number };
  /** Multiplier per added lint (default 0.9). */
  lintFactor?: number;
}

export interface RewardResult {
  /** In [0, 1]. */
  reward: number;
  /** passed ÷ (passed + failed), or 0 when no test ran. */
  passRate: number;
  /** Why the reward is what it is: every zeroing reason, then every lint penalty. */
  reasons: string[];
}

export const DEFAULT_LINT_FACTOR = 0.9;
/** Share of the functions the original tests enter that a tests candidate must enter too. */
export const MIN_COVERAGE = 0.5;

/** Why a tests candidate's strength earns nothing, or null. */
function strengthZero(input: RewardInput): string | null {
  const s = input.strength;
  if (input.failed > 0) return `${input.failed} of the candidate's tests fail on the reference`;
  if (!s) return 'the strength of the tests is unknown';
  if (s.of === 0) return 'the original tests kill no mutant (the task cannot be judged)';
  if (s.ofCovered > 0 && s.covered / s.ofCovered < MIN_COVERAGE)
    return `the tests enter ${s.covered} of the ${s.ofCovered} functions the original tests enter`;
  if (s.killed === 0) return `the tests kill none of the ${s.of} mutants the original tests kill`;
  return null;
}

/** The reward of one candidate (see docs/sandbox.md): zero on any void condition, else the lint-weighted pass rate. */
export function computeReward(input: RewardInput): RewardResult {
  const lintFactor = input.lintFactor ?? DEFAULT_LINT_FACTOR;
  if (!(lintFactor >= 0 && lintFactor <= 1))
    throw new RangeError(`lintFactor must be in [0, 1], got ${lintFactor}`);
  if (
    input.passed < 0 ||
    input.failed < 0 ||
    !Number.isInteger(input.passed) ||
    !Number.isInteger(input.failed)
  )
    throw new RangeError('passed and failed must be non-negative integers');
  const counted = input.passed + input.failed;
  const passRate = counted === 0 ? 0 : input.passed / counted;
  const zero: string[] = [];
  if (input.truncated) zero.push('the generation was truncated');
  zero.push(...input.runFailures);
  zero.push(...input.verdictReasons);
  for (const t of input.tamper)
    zero.push(
      `tamper pattern added: ${t.name} (×${t.added})${t.examples?.length ? `: ${t.examples.join(' | ')}` : ''}`,
    );
  if (counted === 0) zero.push('no test ran');
  else if (input.passed === 0 && input.kind === 'file') zero.push('every test failed');
  if (input.kind === 'tests' && counted > 0) {
    const why = strengthZero(input);
    if (why) zero.push(why);
  }
  if (input.typecheck === 'failed') zero.push('the strict type-check failed');
  for (const d of input.apiDifferences ?? []) zero.push(`exported API changed: ${d}`);
  if (input.typecheck === 'not-run' && zero.length === 0) zero.push('the strict type-check did not run');
  if (zero.length > 0) return { reward: 0, passRate, reasons: zero };
  const reasons: string[] = [];
  let penalties = 0;
  for (const l of input.lints) {
    penalties += l.added;
    reasons.push(`lint added: ${l.name} (×${l.added}, each ×${lintFactor})`);
  }
  let score = passRate;
  if (input.kind === 'tests' && input.strength) {
    const s = input.strength;
    score = Math.min(1, s.killed / s.of);
    if (s.killed < s.of)
      reasons.push(`the tests kill ${s.killed} of the ${s.of} mutants the original tests kill`);
  } else if (input.failed > 0) reasons.push(`${input.failed} of ${counted} tests failed`);
  const reward = score * lintFactor ** penalties;
  return { reward: Math.round(reward * 1e9) / 1e9, passRate, reasons };
}
