// A node for load drills, built by the test harness with the project's own modules (production has
// no such switch): `vtnode join` or `vtnode start` whose scorer is a fast script instead of the
// sandbox, so a drill measures the mesh (placement, sample logs, gossip, collectors), not test runs.
// The script: reward 1 when the candidate is the task's reference content (by its sha256), else 0.
//   node test/helpers/fast-scoring-node.ts join TOKEN [node options]
//   node test/helpers/fast-scoring-node.ts start --data-dir DIR [node options]

import { prepareJoin } from '../../cli/commands/join.ts';
import { dataDirFrom, mergeConfig, NODE_OPTIONS } from '../../cli/node-options.ts';
import { commandLine } from '../../cli/options.ts';
import { runDaemonForeground } from '../../cli/run-daemon.ts';
import { contentHash } from '../../protocol/sample.ts';
import type { ScoreResult, Scorer } from '../../sandbox/scorer.ts';
import { withScore } from './scorer-wrap.ts';

/** The scorer with its sandbox run replaced by a reference-hash comparison. */
export function fastScoring(scorer: Scorer): Scorer {
  return withScore(scorer, async (request): Promise<ScoreResult> => {
    const ok = contentHash(request.candidate) === request.task.referenceHash && !request.truncated;
    return {
      taskId: request.task.id,
      status: 'scored',
      error: null,
      reward: ok ? 1 : 0,
      passRate: ok ? 1 : 0,
      passed: ok ? 1 : 0,
      failed: ok ? 0 : 1,
      skipped: 0,
      todo: 0,
      reasons: [ok ? 'the reference (fast load-drill scorer)' : 'not the reference (fast load-drill scorer)'],
      tests: [],
      lints: [],
      tamper: [],
      typecheck: 'not-run',
      diagnostics: '',
      warnings: [],
      fingerprint: await scorer.fingerprint(request.task, request.workspaceDir),
      backend: 'fast-script',
      run: null,
      typecheckRun: null,
      typecheckService: null,
    };
  });
}

if (import.meta.main) {
  const [mode, ...argv] = process.argv.slice(2);
  if (mode === 'join') {
    const { dataDir, fleet, config } = await prepareJoin(argv);
    process.exit(await runDaemonForeground(dataDir, fleet, config, { wrapScorer: fastScoring }));
  } else if (mode === 'start') {
    const { values } = commandLine({
      prose: 'Usage: fast-scoring-node.ts start [node options]',
      groups: [NODE_OPTIONS],
    }).parse(argv);
    const dataDir = dataDirFrom(values);
    const fleet = await dataDir.readFleet();
    if (!fleet) throw new Error(`${dataDir.root} is not in a fleet`);
    const config = mergeConfig(await dataDir.readConfig(), values);
    process.exit(await runDaemonForeground(dataDir, fleet, config, { wrapScorer: fastScoring }));
  } else {
    process.stderr.write('usage: fast-scoring-node.ts join TOKEN ... | start --data-dir DIR ...\n');
    process.exit(2);
  }
}
