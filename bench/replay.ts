// The differential replay on examples/ledger (issue 24): for the first N file tasks (default 4), the
// reference is recorded and self-replayed, then an honest copy of it is judged and replayed; prints,
// per task, the replay's mode, the CPU of the calibration's replay runs, of the candidate's test run and
// of its replay (each confined run's own usage: exact from its cgroup as root), and the ratios. With
// `--vitest`, every replay runs under vitest (the mode before the node mode existed), for comparison in
// the same run of the machine. Needs bwrap.
//
//   npx node bench/replay.ts [N] [--vitest]

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { mine } from '../node/tasks/mine.ts';
import { createConfinement } from '../sandbox/backend.ts';
import { createJudgeRunner, type JudgeRunner } from '../sandbox/judge-run.ts';
import { DEFAULT_LIMITS } from '../sandbox/limits.ts';
import { createReplayJudge } from '../sandbox/replay/judge.ts';

const LEDGER = resolve(import.meta.dirname, '..', 'examples', 'ledger');
const args = process.argv.slice(2);
const vitestOnly = args.includes('--vitest');
const count = Number(args.find((a) => /^\d+$/.test(a)) ?? 4);

const { tasks } = await mine({ root: LEDGER });
const pick = tasks.filter((t) => t.kind === 'file').slice(0, count);
const confinement = await createConfinement({});
const judges = createJudgeRunner({ confinement, baseLimits: DEFAULT_LIMITS, packageCache: null });

/** The judge runner the replay uses: sums its runs' CPU; with --vitest, node-mode runs become vitest's. */
let cpuMs = 0;
const measured: JudgeRunner = {
  ...judges,
  async run(request) {
    const forced = vitestOnly && request.nodeArgs ? null : request;
    if (!forced) throw new Error('--vitest: a node-mode run was asked for');
    const r = await judges.run(forced);
    cpuMs += r.run?.usage.cpuMs ?? 0;
    return r;
  },
};
const rj = createReplayJudge(measured, vitestOnly ? { modes: ['vitest'] } : {});
const since = () => {
  const at = cpuMs;
  return () => cpuMs - at;
};

const total = { calibration: 0, tests: 0, replay: 0, n: 0 };
for (const task of pick) {
  const ref = await readFile(resolve(LEDGER, task.target), 'utf8');
  const refRun = await judges.run({ task, workspaceDir: LEDGER, overlay: {}, harness: false });
  let spent = since();
  const key = await rj.record(task, LEDGER, ref, refRun);
  if ('infra' in key) throw new Error(key.infra);
  const calibration = spent();
  const cand = `${ref}\n// an honest copy\n`;
  spent = since();
  const run = await measured.run({ task, workspaceDir: LEDGER, overlay: { [task.target]: cand } });
  const tests = spent();
  spent = since();
  const v = await rj.replay(task, LEDGER, cand, key, run.verdict!.cases);
  const replay = spent();
  if ('infra' in v) throw new Error(v.infra);
  Object.assign(total, {
    calibration: total.calibration + calibration,
    tests: total.tests + tests,
    replay: total.replay + replay,
    n: total.n + 1,
  });
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  console.log(
    `${task.target} (${key.mode}, ${key.kept}/${key.recorded} calls): calibration's replay runs ${s(calibration)} CPU, ` +
      `test run ${s(tests)}, replay ${s(replay)} (${v.compared} compared, ${v.differences.length} differ)`,
  );
}
const mean = (ms: number) => (ms / total.n / 1000).toFixed(2);
console.log(
  `mean per task: calibration's replay runs ${mean(total.calibration)} s CPU; per candidate: test run ${mean(total.tests)} s, ` +
    `replay ${mean(total.replay)} s, replay ÷ test run ${(total.replay / total.tests).toFixed(2)}`,
);
