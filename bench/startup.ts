/**
 * Start-up cost of the package: CPU time of short commands and the resident memory of an idle node,
 * as ratios to bare `node -e 0` (and an idle bare node) measured in the same run. Linux (/proc).
 *
 *   npx node bench/startup.ts [--runs 5] [--settle 15] [--json]
 *
 * Builds the bundle into a temp folder laid out as the installed package (dist/, bin/, the runtime
 * files), then runs its bin/vtnode.js as a user's shell would (through its #! line, so with the V8
 * flags it carries). For comparison, the same commands from the sources (`node bin/vtnode.js` in the
 * repository, what `npx vtnode` runs). CPU time is the children's user + system time from
 * /proc/self/stat (cutime + cstime, clock ticks), median of --runs; RSS is VmRSS of the idle node
 * --settle seconds after it is ready and its sandbox self-test has finished.
 */
import { execFile, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { freePort } from '../node/net.ts';

const REPO = dirname(dirname(fileURLToPath(import.meta.url)));
const TICK_S = 0.01; // USER_HZ is 100 on Linux
const run = promisify(execFile);

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    settle: { type: 'string', default: '15' },
    json: { type: 'boolean', default: false },
  },
  strict: true,
});
const runs = Number(values.runs);
const settleS = Number(values.settle);
if (!Number.isInteger(runs) || runs < 1)
  throw new Error(`--runs: expected a positive integer, got "${values.runs}"`);
if (!(settleS >= 0)) throw new Error(`--settle: expected seconds >= 0, got "${values.settle}"`);

/** CPU seconds of this process's waited-for children so far (utime + stime of the dead ones). */
async function childrenCpu(): Promise<number> {
  const stat = await readFile('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After "(comm)": field 3 is index 0, so cutime (16) and cstime (17) are 13 and 14.
  return (Number(fields[13]) + Number(fields[14])) * TICK_S;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Median CPU seconds and wall seconds of `cmd args` run to completion. */
async function cost(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ cpuS: number; wallS: number }> {
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let i = 0; i < runs; i++) {
    const before = await childrenCpu();
    const t = performance.now();
    await run(cmd, args, { env, timeout: 60_000 });
    wall.push((performance.now() - t) / 1000);
    cpu.push((await childrenCpu()) - before);
  }
  return { cpuS: median(cpu), wallS: median(wall) };
}

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  if (!kb) throw new Error(`/proc/${pid}/status: no VmRSS`);
  return Number(kb[1]) / 1024;
}

/** RSS of an idle process: `cmd args` started, ready when `ready()` says so, then --settle seconds. */
async function idleRss(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: (output: () => string) => Promise<void>,
): Promise<number> {
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    out += d;
  });
  try {
    await ready(() => out);
    await new Promise((r) => setTimeout(r, settleS * 1000));
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited early:\n${out}`);
    return await rssMiB(child.pid!);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

async function until(
  what: string,
  test: () => Promise<boolean> | boolean,
  timeoutMs = 90_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const dir = await mkdtemp(join(tmpdir(), 'vt-bench-startup-'));
try {
  // The package layout: a fresh bundle, a copy of bin/ (a symlink would resolve back to the
  // repository, where bin/vtnode.js runs the sources), the runtime files and typescript beside it.
  await run(process.execPath, [join(REPO, 'scripts', 'build.ts'), '--out-root', dir], { timeout: 300_000 });
  await mkdir(join(dir, 'bin'));
  await copyFile(join(REPO, 'bin', 'vtnode.js'), join(dir, 'bin', 'vtnode.js'));
  for (const f of ['sandbox', 'examples', 'node_modules', 'package.json'])
    await symlink(join(REPO, f), join(dir, f));
  const pkgBin = join(dir, 'bin', 'vtnode.js');
  const home = join(dir, 'home');
  const env = {
    ...process.env,
    HOME: home,
    VTNODE_HOME: join(home, '.vtnode'),
    VTNODE_DEBUG: '',
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
  };
  const node = process.execPath;
  const srcBin = join(REPO, 'bin', 'vtnode.js');

  const bare = await cost(node, ['-e', '0'], env);
  const commands: Record<
    string,
    { package: { cpuS: number; wallS: number }; sources: { cpuS: number; wallS: number } }
  > = {};
  for (const args of [['--help'], ['--version'], ['run', '--help'], ['status', '--help']]) {
    commands[`vtnode ${args.join(' ')}`] = {
      package: await cost(pkgBin, args, env),
      sources: await cost(node, [srcBin, ...args], env),
    };
  }

  // Idle: a bare node that waits, then a `vtnode start` of a fresh fleet (loopback, no model server).
  const bareIdle = await idleRss(node, ['-e', 'setInterval(() => {}, 1e6)'], env, async () => {});
  await run(pkgBin, ['init', '--fleet', 'bench', '--listen', `/ip4/127.0.0.1/tcp/${await freePort()}`], {
    env,
    timeout: 60_000,
  });
  const selfTestDone = async () => {
    const { stdout } = await run(pkgBin, ['status', '--json'], { env, timeout: 30_000 }).catch(() => ({
      stdout: '',
    }));
    if (!stdout) return false;
    const nodes = (JSON.parse(stdout) as { nodes: { sandbox?: { detail?: string } }[] }).nodes;
    return nodes[0]?.sandbox !== undefined && nodes[0].sandbox.detail !== 'self-test running';
  };
  const idle = async (cmd: string, args: string[]) =>
    idleRss(cmd, args, env, async (out) => {
      await until('the node to be ready', () => /is in fleet "bench"/.test(out()));
      await until('the sandbox self-test', selfTestDone);
    });
  const daemonPackage = await idle(pkgBin, ['start']);
  const daemonSources = await idle(node, [srcBin, 'start']);

  const result = {
    node: process.version,
    runs,
    settleS,
    bare: { cpuS: bare.cpuS, wallS: bare.wallS, idleRssMiB: bareIdle },
    commands: Object.fromEntries(
      Object.entries(commands).map(([k, v]) => [
        k,
        {
          package: { ...v.package, cpuRatio: v.package.cpuS / bare.cpuS },
          sources: { ...v.sources, cpuRatio: v.sources.cpuS / bare.cpuS },
        },
      ]),
    ),
    idleNode: {
      package: { rssMiB: daemonPackage, ratio: daemonPackage / bareIdle },
      sources: { rssMiB: daemonSources, ratio: daemonSources / bareIdle },
    },
  };
  if (values.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    const f = (x: number, d = 2) => x.toFixed(d);
    const lines = [
      `node ${result.node}, median of ${runs} runs; idle RSS ${settleS} s after ready`,
      `bare node -e 0: ${f(bare.cpuS)} s CPU, ${f(bare.wallS)} s wall; idle bare node ${f(bareIdle, 1)} MiB RSS`,
      '',
      'command                 package CPU s (x bare)   sources CPU s (x bare)',
      ...Object.entries(result.commands).map(
        ([k, v]) =>
          `${k.padEnd(24)}${`${f(v.package.cpuS)} (x${f(v.package.cpuRatio, 1)})`.padEnd(25)}${f(v.sources.cpuS)} (x${f(v.sources.cpuRatio, 1)})`,
      ),
      '',
      `idle node (vtnode start): package ${f(daemonPackage, 1)} MiB (x${f(result.idleNode.package.ratio)} bare), sources ${f(daemonSources, 1)} MiB (x${f(result.idleNode.sources.ratio)} bare)`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
