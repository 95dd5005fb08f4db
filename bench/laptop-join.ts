// A laptop joins a fleet with nothing but a token, a model server and --fetch-workspaces (issue 13):
// the time from `vtnode join` to its first verified sample, against a plain `npm ci` of the same
// workspace measured in the same run (what a user who had cloned the repository at the mined commit
// would pay before running anything at all).
//   npx node bench/laptop-join.ts [--runs 2]
// The fleet: one node holding examples/ledger (one job at a time, so a campaign of 24 tasks keeps it
// busy), running a campaign when each laptop joins; the laptop fetches the workspace from it with the
// product's defaults (chunk size, no bandwidth cap), installs it (npm ci, its lockfile), runs its
// readiness check and calibration sample (one mined task's reference scored in its sandbox),
// advertises it and takes jobs. Its model answers with the reference: its first sample verifies.
import { spawn } from 'node:child_process';
import { cp, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { createEmulator, type Emulator } from '../node/model-server/emulator.ts';
import { workspaceIdentity } from '../node/workspace/content-id.ts';
import { installEnv } from '../node/workspace/install.ts';
import { LEDGER, MODEL, mineLedger, runCampaign, writeTasks } from '../test/helpers/campaign.ts';
import { eventually, Sandbox } from '../test/helpers/cli.ts';
import { initFleet, joinNode, status } from '../test/helpers/fleet.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '2' } } });
const runs = Number(values.runs);
const box = new Sandbox();
const servers: Emulator[] = [];

/** A fresh copy of the workspace's tracked files (what a clone at the mined commit holds). */
async function copyTracked(to: string): Promise<void> {
  for (const f of (await workspaceIdentity(LEDGER)).files) {
    await mkdir(dirname(join(to, f)), { recursive: true });
    await cp(join(LEDGER, f), join(to, f));
  }
}

/** `npm ci` in a fresh copy, as the laptop runs it (node/workspace/install.ts), in ms. */
async function plainNpmCi(): Promise<number> {
  const dir = await box.tempDir('vt-bench-npmci-');
  await copyTracked(dir);
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn('npm', ['ci'], {
      cwd: dir,
      stdio: 'ignore',
      env: installEnv(),
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`npm ci exited with ${code}`))));
  });
  return performance.now() - t0;
}

const emulator = async (tasks: Awaited<ReturnType<typeof mineLedger>>['tasks']) => {
  const s = await createEmulator({
    emulate: 'llama-server',
    models: [MODEL],
    tasks,
    timeScale: 0.05,
    concurrency: 2,
    script: 'reference',
  });
  servers.push(s);
  return s;
};

try {
  const dir = await box.tempDir('vt-bench-laptop-');
  const { tasks } = await mineLedger(dir);
  const fileTasks = tasks.filter((t) => t.kind === 'file');
  const holderServer = await emulator(tasks);
  const fleet = await initFleet(box, 'laptop-bench', [
    '--model-server',
    holderServer.url,
    '--workspace',
    LEDGER,
    '--max-jobs',
    '1',
  ]);
  box.spawn(['start', '--data-dir', fleet.dataDir]);
  await eventually(
    async () => (await status(fleet.dataDir)).nodes.find((n) => n.self)?.sandbox.ok,
    90_000,
    'the holder ready',
  );
  const rows: { npmCiMs: number; joinMs: number; fetchMs: number; installMs: number; calibrateMs: number }[] =
    [];
  for (let run = 0; run < runs; run++) {
    const npmCiMs = await plainNpmCi();
    const file = await writeTasks(join(dir, `run-${run}.jsonl`), fileTasks.slice(0, 24));
    const campaign = runCampaign(fleet.dataDir, file, ['-k', '2', '--campaign', `laptop-${run}`]);
    const laptopServer = await emulator(tasks);
    const t0 = performance.now();
    const laptop = await joinNode(box, fleet.token, [
      '--model-server',
      laptopServer.url,
      '--fetch-workspaces',
      '--max-jobs',
      '1',
    ]);
    await laptop.proc.waitFor(/sample \S+ verified/, 600_000);
    const joinMs = performance.now() - t0;
    const ready =
      /fetched \d+ chunks \(\d+ reused\) in (\d+) ms, installed \(.*?\) in (\d+) ms, calibrated .*? in (\d+) ms/.exec(
        laptop.proc.output(),
      );
    rows.push({
      npmCiMs,
      joinMs,
      fetchMs: Number(ready?.[1] ?? NaN),
      installMs: Number(ready?.[2] ?? NaN),
      calibrateMs: Number(ready?.[3] ?? NaN),
    });
    laptop.proc.child.kill('SIGTERM');
    await laptop.proc.exited;
    const res = await campaign;
    if (res.code !== 0) throw new Error(`campaign ${run}: ${res.stderr}`);
  }
  const s = (ms: number) => (ms / 1000).toFixed(1);
  console.log(
    '| run | plain npm ci | join → first verified sample | ratio | of which fetch | install | calibration |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const [i, r] of rows.entries())
    console.log(
      `| ${i + 1} | ${s(r.npmCiMs)} s | ${s(r.joinMs)} s | ${(r.joinMs / r.npmCiMs).toFixed(2)}× | ${s(r.fetchMs)} s | ${s(r.installMs)} s | ${s(r.calibrateMs)} s |`,
    );
} finally {
  await box.cleanup();
  await Promise.all(servers.map((s) => s.close()));
}
