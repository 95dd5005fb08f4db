// A member that takes jobs and never answers, for the adversarial drills, built by the test harness
// with the project's own modules (production has no switch for it): `vtnode join`, whose scorer never
// returns. It advertises its models and slots like any node, accepts jobs, generates (so it sends
// `generated` progress), and then holds every sample forever.
//   node test/helpers/black-hole-worker.ts join TOKEN [node options]
import { prepareJoin } from '../../cli/commands/join.ts';
import { runDaemonForeground } from '../../cli/run-daemon.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { withScore } from './scorer-wrap.ts';

/** The scorer with every score held until the node stops. */
export function blackHole(scorer: Scorer): Scorer {
  return withScore(scorer, () => new Promise(() => {}));
}

if (import.meta.main) {
  const [command, ...args] = process.argv.slice(2);
  if (command !== 'join') throw new Error('usage: black-hole-worker.ts join TOKEN [node options]');
  const { dataDir, fleet, config } = await prepareJoin(args);
  process.exit(await runDaemonForeground(dataDir, fleet, config, { wrapScorer: blackHole }));
}
