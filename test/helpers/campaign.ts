import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createEmulator, type Emulator, type EmulatorOptions } from '../../node/model-server/emulator.ts';
import { Task } from '../../protocol/task.ts';
import { REPO, type Sandbox, vtnode } from './cli.ts';
import { initFleet, joinNode, peerIdOf, startNode, waitForPeers } from './fleet.ts';
import { notYet } from './poll.ts';

export const LEDGER = join(REPO, 'examples', 'ledger');
export const MODEL = 'coder';

/** Mines the example corpus once into `dir`; returns the tasks file and its tasks. */
export async function mineLedger(dir: string): Promise<{ file: string; tasks: Task[] }> {
  const file = join(dir, 'tasks.jsonl');
  const res = await vtnode(['mine', '--root', LEDGER, '--out', file, '--json'], { timeoutMs: 120_000 });
  if (res.code !== 0) throw new Error(`mine failed: ${res.stderr}`);
  const tasks = (await readFile(file, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => Task.parse(JSON.parse(l)));
  return { file, tasks };
}

/** Writes a tasks file holding `tasks`. */
export async function writeTasks(path: string, tasks: Task[]): Promise<string> {
  await writeFile(path, `${tasks.map((t) => JSON.stringify(t)).join('\n')}\n`);
  return path;
}

export interface TestFleet {
  dirs: string[];
  peers: string[];
  servers: Emulator[];
}

/**
 * A fleet of `n` nodes (separate processes), each with its own emulated model server (like one Mac
 * each) serving MODEL, holding the example corpus as a workspace. Node 0 is the submitter.
 * `runArgs(i)` adds arguments to node i's `start`/`join` that are not saved node options (`--ui`).
 */
export async function startFleet(
  box: Sandbox,
  fleet: string,
  n: number,
  tasks: Task[],
  emulator: Partial<EmulatorOptions> = {},
  runArgs: (i: number) => string[] = () => [],
): Promise<TestFleet> {
  const servers: Emulator[] = [];
  for (let i = 0; i < n; i++) {
    servers.push(
      await createEmulator({
        emulate: 'llama-server',
        models: [MODEL],
        tasks,
        timeScale: 0.01,
        concurrency: 4,
        cachePrompts: 4,
        script: 'reference',
        ...emulator,
      }),
    );
  }
  const nodeArgs = (i: number) => [
    '--model-server',
    servers[i]!.url,
    '--workspace',
    LEDGER,
    '--max-jobs',
    '2',
  ];
  const { dataDir, token } = await initFleet(box, fleet, nodeArgs(0));
  startNode(box, dataDir, runArgs(0));
  const dirs = [dataDir];
  for (let i = 1; i < n; i++)
    dirs.push((await joinNode(box, token, [...nodeArgs(i), ...runArgs(i)])).dataDir);
  const peers: string[] = [];
  for (const d of dirs) peers.push(await peerIdOf(d));
  for (const d of dirs) await waitForPeers(d, peers, 30_000);
  return { dirs, peers, servers };
}

export interface RunJson {
  campaign: string;
  status: string;
  seed: number;
  samples: { planned: number; generated: number; scored: number; verified: number; preexisting: number };
  tasks: { taskId: string; nodes: string[]; samples: number; verified: number }[];
  cacheHitRate: number | null;
  nodes: { peerId: string; scored: number }[];
  problem: string | null;
  campaignSeconds: number | null;
}

/** Waits until the node of `dir` sees `n` nodes, each serving a model with a working sandbox. */
export async function waitReady(dir: string, n: number): Promise<void> {
  const { eventually } = await import('./cli.ts');
  const { status } = await import('./fleet.ts');
  await eventually(
    async () => {
      const s = await status(dir);
      const ready = (x: (typeof s.nodes)[number]) =>
        x.models.length > 0 && x.sandbox.ok && x.workspaces.length > 0;
      if (s.nodes.length === n && s.nodes.every(ready)) return true;
      return notYet(
        s.nodes.map((x) => ({
          node: x.peerId.slice(-8),
          models: x.models.length,
          sandbox: x.sandbox,
          workspaces: x.workspaces.length,
        })),
      );
    },
    60_000,
    `${n} ready nodes (models, sandbox, workspace)`,
  );
}

/** `vtnode run ... --json` from the submitter node `dir`. */
export async function runCampaign(
  dir: string,
  tasksFile: string,
  extra: string[],
): Promise<{ code: number | null; json: RunJson | null; stderr: string }> {
  const res = await vtnode(
    ['run', '--data-dir', dir, '--tasks', tasksFile, '--model', MODEL, '--split', 'all', '--json', ...extra],
    {
      timeoutMs: 240_000,
    },
  );
  let json: RunJson | null = null;
  try {
    json = JSON.parse(res.stdout) as RunJson;
  } catch {
    // No summary: the caller checks stderr.
  }
  return { code: res.code, json, stderr: res.stderr };
}
