// A lying worker for the collector drills, built by the test harness with the project's own modules
// (production has no switch for it): `vtnode join`, with a scorer that reports every candidate it
// scores as verified (reward 1), whatever the sandbox said. Run: node test/helpers/lying-worker.ts TOKEN [node options]
import { prepareJoin } from '../../cli/commands/join.ts';
import { runDaemonForeground } from '../../cli/run-daemon.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { withScore } from './scorer-wrap.ts';

/** The scorer with every scored reward raised to 1 (infrastructure errors stay errors). */
export function inflating(scorer: Scorer): Scorer {
  return withScore(scorer, async (request, real) => {
    const r = await real.score(request);
    return r.status === 'scored' ? { ...r, reward: 1 } : r;
  });
}

if (import.meta.main) {
  const { dataDir, fleet, config } = await prepareJoin(process.argv.slice(2));
  process.exit(await runDaemonForeground(dataDir, fleet, config, { wrapScorer: inflating }));
}
