// One test file's replay in the node mode (a worker of node-main.mjs): the replayer first (it installs
// the controlled clock and random numbers before the target loads), then the target and the modules it
// imports, as the generated test file does under vitest (judge.ts, replayFile).
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { workerData } from 'node:worker_threads';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const { replay } = await import('./replay.mjs');
const target = await import(pathToFileURL(join(ROOT, workerData.target)).href);
const { modules } = await import(pathToFileURL(join(ROOT, workerData.imports)).href);
await replay(workerData.n, target, modules);
// Timers or handles the target left open must not keep the replay alive.
process.exit(0);
