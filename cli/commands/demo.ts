import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, open, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from '../../node/async/sleep.ts';
import { connectControl } from '../../node/control/client.ts';
import { DataDir } from '../../node/data-dir.ts';
import { createEmulator, type Emulator } from '../../node/model-server/emulator.ts';
import { freePort } from '../../node/net.ts';
import type { FleetStatus } from '../../node/status.ts';
import { createConfinement } from '../../sandbox/backend.ts';
import { BackendUnavailableError } from '../../sandbox/confinement.ts';
import { readTasks, readTasksFile } from '../../sandbox/tasks-file.ts';
import { CliError, type Command } from '../command.ts';
import { pickDemoTasks } from '../demo-plan.ts';
import { commandLine, count, flag, group, int, string } from '../options.ts';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(REPO, 'bin', 'vtnode.js');
const CORPUS = join(REPO, 'examples', 'ledger');

const line = commandLine({
  prose: `Usage: vtnode demo [--nodes 2] [-k 2] [--tasks 8] [--dir DIR] [--no-ui]

The whole pipeline on this machine, on embedded defaults: mines the example corpus
(examples/ledger), takes a share of its tasks (eval tasks first, both kinds, spread over modules),
calibrates them in the sandbox, starts a fleet of N nodes (separate
processes on loopback), each with an emulated model server (no weights: it answers with the
references, mutants of them and garbage, with real prompt-cache behaviour), runs a campaign of k
samples per task through the mesh, then has a collector node gather the verified samples (checked
against their signed digests, spot-audited), exports them for mlx_lm.lora and reports pass@k on the
eval split (the held-out tasks) and on train. Every node and the collector start with the reference
runs calibration already made (the same sandbox, workspace and judges: the same cache keys).
Prints where everything was written.`,
  groups: [
    group('Options:', {
      nodes: int({ doc: 'fleet size', min: 1, max: 16, default: 2 }),
      k: count({ doc: 'samples per task', short: 'k', default: 2 }),
      tasks: count({ doc: 'tasks taken from the corpus, 0 for all', default: 8 }),
      dir: string({ doc: 'where to work (default a new temp dir)', value: 'DIR' }),
      'no-ui': flag({
        doc: 'no web view (by default the first node and the collector serve one on loopback, and their addresses are printed)',
      }),
    }),
  ],
});

async function sandboxFlags(): Promise<string[]> {
  try {
    await createConfinement();
    return [];
  } catch (err) {
    if (!(err instanceof BackendUnavailableError)) throw err;
    process.stderr.write(
      `\n!! ${err.message}\n!! The demo runs UNCONFINED (its candidates are the example corpus's own code and ` +
        'scripted variants of it). Install bubblewrap (apt-get install bubblewrap) before scoring anything else.\n',
    );
    return ['--unconfined'];
  }
}

/**
 * Gives a node's data dir the reference runs calibration made: the scorer keys them by evaluation
 * fingerprint, task and reference, so a node scoring the same tasks in the same sandbox reuses them
 * instead of running every reference again (it still runs any it lacks, and checks each entry on read).
 */
async function seedReferences(calibration: string, dataDir: string): Promise<void> {
  const from = join(calibration, 'cache', 'references');
  if (!existsSync(from)) return;
  await mkdir(join(dataDir, 'cache'), { recursive: true, mode: 0o700 });
  await cp(from, join(dataDir, 'cache', 'references'), { recursive: true });
}

function step(text: string): void {
  process.stderr.write(`\n== ${text}\n`);
}

/** Runs `vtnode ARGS` with stderr shown; stdout shown, or written to `stdoutFile`; `env` added. */
async function vt(
  args: string[],
  inherit = true,
  stdoutFile?: string,
  env?: Record<string, string>,
): Promise<number> {
  const out = stdoutFile ? await open(stdoutFile, 'w') : null;
  try {
    return await new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], {
        stdio: ['ignore', out ? out.fd : inherit ? 'inherit' : 'ignore', 'inherit'],
        ...(env ? { env: { ...process.env, ...env } } : {}),
      });
      child.on('error', reject);
      child.on('exit', (code) => resolve(code ?? 1));
    });
  } finally {
    await out?.close();
  }
}

async function capture(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(out) : reject(new CliError(`vtnode ${args[0]} failed`)),
    );
  });
}

export const command: Command = {
  name: 'demo',
  summary: 'the whole pipeline on this machine: mine, calibrate, a local fleet, a campaign, a dataset',
  usage: line.usage,
  line,
  async run(argv) {
    const { values } = line.parse(argv);
    const { nodes: n, k, tasks: taskCount } = values;
    const dir = values.dir ?? (await mkdtemp(join(tmpdir(), 'vtnode-demo-')));
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const tasks = join(dir, 'tasks.jsonl');
    const picked = join(dir, 'tasks.demo.jsonl');
    const calibrated = join(dir, 'tasks.calibrated.jsonl');
    // Calibration's own data dir (its reference runs seed the nodes'), not the user's ~/.vtnode.
    const calibration = join(dir, 'calibration');

    if (!existsSync(join(CORPUS, 'node_modules'))) {
      step(`installing the example corpus's dependencies (npm ci in ${CORPUS})`);
      const code = await new Promise<number>((resolve, reject) => {
        const child = spawn('npm', ['ci', '--no-audit', '--no-fund'], {
          cwd: CORPUS,
          stdio: ['ignore', 'inherit', 'inherit'],
        });
        child.on('error', reject);
        child.on('exit', (c) => resolve(c ?? 1));
      });
      if (code !== 0) throw new CliError(`npm ci in ${CORPUS} failed`);
    }
    // The demo's candidates are the corpus's own code and scripted variants of it: trusted input. Without
    // the platform's sandbox (bubblewrap missing on Linux) it says so loudly and runs unconfined.
    const sandbox = await sandboxFlags();

    step(`mining ${CORPUS}`);
    if ((await vt(['mine', '--root', CORPUS, '--out', tasks])) !== 0) throw new CliError('mining failed');
    const mined = await readTasksFile(tasks);
    const chosen = pickDemoTasks(
      mined.map((l) => ({ ...l.task, line: l.line })),
      taskCount,
    );
    await writeFile(picked, chosen.map((t) => `${t.line}\n`).join(''));
    const evalCount = chosen.filter((t) => t.split === 'eval').length;
    step(
      `calibrating ${chosen.length} of the ${mined.length} tasks (${evalCount} eval): every task whose reference does not score 1.0 in the sandbox is dropped`,
    );
    const calibrate = ['calibrate', '--tasks', picked, '--out', calibrated, '--jobs', '2', ...sandbox];
    if ((await vt(calibrate, true, undefined, { VTNODE_HOME: calibration })) !== 0) {
      throw new CliError('calibration failed');
    }
    const kept = await readTasks(calibrated);

    step(`starting ${n} nodes, each with an emulated model server`);
    const servers: Emulator[] = [];
    const nodes: ChildProcess[] = [];
    const dirs = Array.from({ length: n }, (_, i) => join(dir, `node-${i}`));
    try {
      for (let i = 0; i < n; i++) {
        servers.push(
          await createEmulator({
            emulate: 'llama-server',
            models: ['demo-coder'],
            tasks: kept,
            timeScale: 0.05,
            concurrency: 4,
            script: 'mixed',
          }),
        );
      }
      const nodeArgs = (i: number) => [
        '--data-dir',
        dirs[i]!,
        '--model-server',
        servers[i]!.url,
        '--workspace',
        CORPUS,
        '--advert-interval',
        '1s',
        ...sandbox,
      ];
      for (const d of [...dirs, join(dir, 'collector')]) await seedReferences(calibration, d);
      const port = await freePort();
      const token = (
        await capture(['init', '--fleet', 'demo', '--listen', `/ip4/127.0.0.1/tcp/${port}`, ...nodeArgs(0)])
      ).trim();
      // The web view of the first node (the submitter): the fleet and the campaign, live.
      const ui = values['no-ui'] ? [] : ['--ui', String(await freePort())];
      nodes.push(spawn(process.execPath, [BIN, 'start', '--data-dir', dirs[0]!, ...ui], { stdio: 'ignore' }));
      if (ui[1]) process.stderr.write(`   web view: http://127.0.0.1:${ui[1]}/ (fleet and campaign, live)\n`);
      for (let i = 1; i < n; i++) {
        nodes.push(
          spawn(process.execPath, [BIN, 'join', token, '--listen', '/ip4/127.0.0.1/tcp/0', ...nodeArgs(i)], {
            stdio: 'ignore',
          }),
        );
      }
      // Wait for every node to see the others with a model and a working sandbox.
      const deadline = Date.now() + 90_000;
      for (;;) {
        const st = await connectControl(new DataDir(dirs[0]!))
          .then((c) => c.call<FleetStatus>('GET', '/status'))
          .catch(() => null);
        if (st && st.nodes.length === n && st.nodes.every((x) => x.models.length > 0 && x.sandbox.ok)) break;
        if (Date.now() > deadline) throw new CliError('the demo fleet did not come up within 90 s');
        await sleep(500);
      }
      await vt(['status', '--data-dir', dirs[0]!]);

      step(
        `campaign: ${kept.length} tasks × k = ${k}, placed by prompt-cache affinity, scored in each node's sandbox`,
      );
      const summaryFile = join(dir, 'campaign.json');
      const runArgs = ['run', '--data-dir', dirs[0]!, '--tasks', calibrated, '--model', 'demo-coder'];
      runArgs.push('-k', String(k), '--split', 'all', '--campaign', 'demo', '--json');
      if ((await vt(runArgs, true, summaryFile)) !== 0) throw new CliError('the campaign did not complete');
      const scored = (JSON.parse(await readFile(summaryFile, 'utf8')) as { samples: { scored: number } })
        .samples.scored;

      step(
        'collecting: a collector node catches up with every worker, checks each body against its signed digest',
      );
      const dataset = join(dir, 'dataset');
      const collectorDir = join(dir, 'collector');
      const collectArgs = [
        'collect',
        '--token',
        token,
        '--data-dir',
        collectorDir,
        '--listen',
        '/ip4/127.0.0.1/tcp/0',
      ];
      collectArgs.push('--out', dataset, '--tasks', calibrated, '--workspace', CORPUS, ...sandbox);
      const collectorUi = values['no-ui'] ? null : await freePort();
      if (collectorUi !== null) {
        collectArgs.push('--ui', String(collectorUi));
        process.stderr.write(`   web view: http://127.0.0.1:${collectorUi}/ (the dataset, live)\n`);
      }
      // Its catch-up at start runs before it has met any node; the next one would come 30 s later.
      collectArgs.push('--catch-up-interval', '2s');
      // VTNODE_HOME: collect's audit scorer keeps its reference runs in $VTNODE_HOME/cache, not in
      // --data-dir's; pointing it at the collector's data dir keeps the seeded runs in use (and ~/.vtnode clean).
      const collector = spawn(process.execPath, [BIN, ...collectArgs], {
        stdio: 'ignore',
        env: { ...process.env, VTNODE_HOME: collectorDir },
      });
      nodes.push(collector);
      const until = Date.now() + 180_000;
      for (;;) {
        const st = await readFile(join(collectorDir, 'collector.json'), 'utf8')
          .then((t) => JSON.parse(t) as { stats: { samples: number; pending: number } })
          .catch(() => null);
        if (st && st.stats.samples >= scored && st.stats.pending === 0) break;
        if (Date.now() > until)
          throw new CliError('the collector did not gather every sample within 3 minutes');
        await sleep(1000);
      }
      await vt(['status', '--data-dir', collectorDir]);

      step('exporting for mlx_lm.lora, and the eval table (pass@k)');
      await vt(['export', '--from', dataset, '--format', 'mlx', '--out', join(dir, 'mlx')]);
      // The eval table: pass@k on the held-out tasks (what a model is judged on); then on train.
      await vt(['report', '--from', dataset, '--split', 'eval']);
      await vt(['report', '--from', dataset, '--split', 'train']);
      process.stderr.write(
        `\ntasks: ${tasks}\ndemo tasks: ${picked}\ncalibrated: ${calibrated}\ncampaign summary: ${summaryFile}\n` +
          `dataset: ${dataset}\ntraining data: ${join(dir, 'mlx')}\nnode data dirs: ${dirs.join(' ')}\n`,
      );
      return 0;
    } finally {
      for (const node of nodes) node.kill('SIGTERM');
      await Promise.all(
        nodes.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.on('exit', r)))),
      );
      await Promise.all(servers.map((s) => s.close()));
    }
  },
};
