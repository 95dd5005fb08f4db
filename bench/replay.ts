// The differential replay on examples/ledger (issue 24): for the first N file tasks (default 4), the
// reference is recorded and self-replayed, then an honest copy of it is judged and replayed; prints the
// CPU of the candidate's test run and of its replay run (each confined run's own usage: exact from its
// cgroup as root) and the ratio. Needs bwrap.
//
//   npx node bench/replay.ts [N]

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { mine } from '../node/tasks/mine.ts';
import { createConfinement } from '../sandbox/backend.ts';
import { createJudgeRunner } from '../sandbox/judge-run.ts';
import { DEFAULT_LIMITS } from '../sandbox/limits.ts';
import { createReplayJudge } from '../sandbox/replay/judge.ts';

const LEDGER = resolve(import.meta.dirname, '..', 'examples', 'ledger');
const { tasks } = await mine({ root: LEDGER });
const pick = tasks.filter((t) => t.kind === 'file').slice(0, Number(process.argv[2] ?? 4));
const confinement = await createConfinement({});
const judges = createJudgeRunner({ confinement, baseLimits: DEFAULT_LIMITS, packageCache: null });
let last = 0;
const orig = judges.run;
judges.run = async (req) => {
  const r = await orig(req);
  last = r.run?.usage.cpuMs ?? 0;
  return r;
};
const rj = createReplayJudge(judges);
let tests = 0,
  replay = 0,
  n = 0;
for (const task of pick) {
  const ref = await readFile(resolve(LEDGER, task.target), 'utf8');
  const refRun = await orig({ task, workspaceDir: LEDGER, overlay: {}, harness: false });
  const key = await rj.record(task, LEDGER, ref, refRun);
  if ('infra' in key) throw new Error(key.infra);
  const cand = `${ref}\n// an honest copy\n`;
  const run = await judges.run({ task, workspaceDir: LEDGER, overlay: { [task.target]: cand } });
  const t = last;
  const v = await rj.replay(task, LEDGER, cand, key, run.verdict!.cases);
  const r = last;
  if ('infra' in v) throw new Error(v.infra);
  tests += t;
  replay += r;
  n++;
  console.log(
    `${task.target}: test run ${(t / 1000).toFixed(2)} s CPU, replay ${(r / 1000).toFixed(2)} s CPU (${v.compared} calls, ${v.differences.length} differ)`,
  );
}
console.log(
  `mean per candidate: test run ${(tests / n / 1000).toFixed(2)} s, replay ${(replay / n / 1000).toFixed(2)} s, replay ÷ test run ${(replay / tests).toFixed(2)}`,
);
