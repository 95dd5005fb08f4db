import { compareMutants, type Mutant } from './mutants.ts';

/**
 * Mutants per source by default. Each one is a copy of the judged test file in the batched run, and a
 * copy costs vitest about 0.3 s of CPU (one module graph per file), so 32 add ~10 s of CPU per scored
 * candidate on top of its ordinary run (see bench/mutation.ts). 32 also gives a kill ratio with a
 * resolution of 1/32 ≈ 3 %, and with the selection spread across functions and operators it reaches
 * every function of a typical target module (the example corpus has 2–14 functions per file).
 */
export const DEFAULT_MAX_MUTANTS = 32;

export interface SelectOptions {
  /** At most this many mutants (default DEFAULT_MAX_MUTANTS). */
  max?: number;
}

/** Groups items by key, keeping first-seen order of the keys. */
function groupBy<T>(items: T[], key: (t: T) => string): T[][] {
  const groups = new Map<string, T[]>();
  for (const t of items) {
    const k = key(t);
    const g = groups.get(k);
    if (g) g.push(t);
    else groups.set(k, [t]);
  }
  return [...groups.values()];
}

/** Takes the next item of each queue in turn, starting with queue `offset`, until all are empty. */
function roundRobin<T>(queues: T[][], offset = 0): T[] {
  const qs = queues.map((q) => [...q]);
  const out: T[] = [];
  let remaining = qs.reduce((n, q) => n + q.length, 0);
  for (let turn = offset; remaining > 0; turn++) {
    const next = qs[turn % qs.length]!.shift();
    if (next !== undefined) {
      out.push(next);
      remaining--;
    }
  }
  return out;
}

/**
 * A deterministic selection of at most `max` mutants, spread across functions and, within a
 * function, across operators: functions take turns (a file with one huge function does not starve
 * the others), each function cycles through its operators (starting at a different one per function),
 * and within an operator mutants come in id order (ids are hashes: a stable pseudo-random order, not
 * the first lines of the file). The same mutants give the same selection; returned in source order.
 */
export function selectMutants(mutants: Mutant[], options: SelectOptions = {}): Mutant[] {
  const max = options.max ?? DEFAULT_MAX_MUTANTS;
  if (!Number.isInteger(max) || max < 0)
    throw new RangeError(`max must be a non-negative integer, got ${max}`);
  // A canonical order first: the selection depends on the mutants, not on the order they came in.
  const canonical = [...mutants].sort(compareMutants);
  const byFunction = groupBy(canonical, (m) => `${m.file}\0${m.fn}`);
  const perFunction = byFunction.map((group, i) => {
    const byOperator = groupBy(
      [...group].sort((a, b) =>
        a.operator < b.operator ? -1 : a.operator > b.operator ? 1 : a.id < b.id ? -1 : 1,
      ),
      (m) => m.operator,
    );
    return roundRobin(byOperator, i);
  });
  const picked = roundRobin(perFunction).slice(0, max);
  return picked.sort(compareMutants);
}
