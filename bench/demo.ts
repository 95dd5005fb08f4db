// The two-minute demo, measured: wall and CPU time of `vtnode demo` (what `npm run demo` runs), per
// stage and in all, as a ratio to `npm ci` of the repository in the same run (the step a new user takes
// just before). Both run in a fresh `git clone --local` of this repository's HEAD, so the demo also
// installs the example corpus's dependencies as a new user's first demo does.
//
//   npx node bench/demo.ts [--json] [--keep] [--rev REV] [-- DEMO ARGS...]
//
// --rev measures another commit of this repository (e.g. the one before a change), in the same way.
//
// CPU time is the sampled CPU of each command's whole process tree (bench/demo/tree-cpu.ts): the work
// done inside bwrap's pid namespace is not reaped into any parent's rusage. Linux only.
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../test/sandbox/fixtures.ts';
import { sampleTree } from './demo/tree-cpu.ts';

const { values, positionals } = parseArgs({
  options: { json: { type: 'boolean' }, keep: { type: 'boolean' }, rev: { type: 'string' } },
  allowPositionals: true,
});

/** One stage of a measured command: from one `== ` line of its stderr to the next. */
interface Stage {
  name: string;
  wallS: number;
  cpuS: number;
}

interface Measured {
  exitCode: number | null;
  wallS: number;
  cpuS: number;
  stages: Stage[];
  stdout: string;
}

/** Runs argv in cwd, sampling its tree's CPU; a stderr line `== TEXT` starts a stage named by its first words. */
async function measure(
  argv: string[],
  cwd: string,
  echo: boolean,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Measured> {
  const t0 = performance.now();
  const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const stop = new AbortController();
  const { tree, done } = sampleTree({ root: child.pid!, signal: stop.signal });
  const stages: Stage[] = [];
  let current = { name: 'start-up', wall0: 0, cpu0: 0 };
  const close = () => {
    stages.push({
      name: current.name,
      wallS: (performance.now() - t0) / 1000 - current.wall0,
      cpuS: tree.seconds() - current.cpu0,
    });
  };
  let stdout = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d;
    if (echo) process.stderr.write(d);
  });
  let partial = '';
  child.stderr.on('data', (d: Buffer) => {
    if (echo) process.stderr.write(d);
    const lines = (partial + d).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      const m = /^== (\w+)/.exec(line);
      if (!m) continue;
      close();
      current = {
        name: m[1]!,
        wall0: (performance.now() - t0) / 1000,
        cpu0: tree.seconds(),
      };
    }
  });
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  stop.abort();
  await done;
  close();
  return { exitCode, wallS: (performance.now() - t0) / 1000, cpuS: tree.seconds(), stages, stdout };
}

const work = await mkdtemp(join(tmpdir(), 'vtnode-bench-demo-'));
// mkdtemp makes it 0700: as root the sandbox runs candidates under dedicated uids, which must be able
// to read the clone's workspace (a checkout in a world-unreadable folder gives "the runner wrote no report").
await chmod(work, 0o755);
const clone = join(work, 'vtnode');
try {
  const git = await measure(['git', 'clone', '--quiet', '--local', REPO_ROOT, clone], work, false);
  if (git.exitCode !== 0) throw new Error(`git clone --local ${REPO_ROOT} failed`);
  if (values.rev && (await measure(['git', 'checkout', '--quiet', values.rev], clone, false)).exitCode !== 0)
    throw new Error(`git checkout ${values.rev} failed`);
  const npmCi = await measure(['npm', 'ci', '--prefer-offline', '--no-audit', '--no-fund'], clone, false);
  if (npmCi.exitCode !== 0) throw new Error('npm ci failed');
  const demo = await measure(
    [process.execPath, 'bin/vtnode.js', 'demo', '--dir', await mkdtemp(join(work, 'demo-')), ...positionals],
    clone,
    !values.json,
    // A fresh $VTNODE_HOME: a first demo, whose one-shot commands find no reference runs cached by
    // earlier ones (revisions before 6ab98e5 calibrated into ~/.vtnode/cache and reused it).
    { ...process.env, VTNODE_HOME: await mkdtemp(join(work, 'home-')) },
  );
  if (demo.exitCode !== 0) throw new Error(`vtnode demo exited ${demo.exitCode}`);
  // The eval table: the rows (one per model) under `split: eval`'s header, up to the next table.
  const evalTable = /^split: eval,.*\n.*\n((?:(?!split:).*\n)*)/m.exec(demo.stdout);
  const result = {
    npmCi: { wallS: npmCi.wallS, cpuS: npmCi.cpuS },
    demo: { wallS: demo.wallS, cpuS: demo.cpuS, stages: demo.stages },
    ratio: { wall: demo.wallS / npmCi.wallS, cpu: demo.cpuS / npmCi.cpuS },
    evalRows: evalTable ? evalTable[1]!.split('\n').filter((l) => /\d%/.test(l)).length : 0,
  };
  if (result.evalRows === 0) {
    process.stderr.write('the demo showed no eval table rows\n');
    process.exitCode = 1;
  }
  if (values.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    const f = (x: number) => x.toFixed(1).padStart(7);
    process.stdout.write(`\nstage                 wall s    CPU s\n`);
    for (const s of demo.stages) process.stdout.write(`${s.name.padEnd(20)}${f(s.wallS)}  ${f(s.cpuS)}\n`);
    process.stdout.write(
      `demo (all)          ${f(demo.wallS)}  ${f(demo.cpuS)}\nnpm ci              ${f(npmCi.wallS)}  ${f(npmCi.cpuS)}\n` +
        `ratio demo / npm ci: wall ${result.ratio.wall.toFixed(2)}, CPU ${result.ratio.cpu.toFixed(2)}; eval table rows: ${result.evalRows}\n`,
    );
  }
} finally {
  if (!values.keep) await rm(work, { recursive: true, force: true });
  else process.stderr.write(`kept ${work}\n`);
}
