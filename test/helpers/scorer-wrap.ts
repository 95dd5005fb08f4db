import type { ScoreRequest, ScoreResult, Scorer } from '../../sandbox/scorer.ts';

/** `scorer` with its `score` replaced (the harness's lying, fast or silent workers); the rest is the real scorer's. */
export function withScore(
  scorer: Scorer,
  score: (request: ScoreRequest, real: Scorer) => Promise<ScoreResult>,
): Scorer {
  return {
    get confinement() {
      return scorer.confinement;
    },
    get selfTest() {
      return scorer.selfTest;
    },
    fingerprint: (task, dir) => scorer.fingerprint(task, dir),
    close: () => scorer.close(),
    score: (request) => score(request, scorer),
  };
}
