// The replay's node mode: each judged test file's recorded calls are performed in turn, one thread,
// each file against a module graph of its own (node-hooks.mjs: the `?vtnode-file=<n>` query), as the
// test runner gives each test file fresh modules. The replayer is loaded first: it installs the
// controlled clock and random numbers before any target loads.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const DIR = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(DIR);
const plan = JSON.parse(readFileSync(join(DIR, 'node-plan.json'), 'utf8'));
const { replay } = await import('./replay.mjs');
const { loadedTypeScript } = await import('./node-hooks.mjs');
const inGraph = (rel, n) => `${pathToFileURL(join(ROOT, rel)).href}?vtnode-file=${n}`;

for (const file of plan.files) {
  try {
    const target = await import(inGraph(file.target, file.n));
    const { modules } = await import(inGraph(file.imports, file.n));
    await replay(file.n, target, modules);
  } catch (err) {
    // This file's replay wrote no outputs (the host reports it); the next file still runs.
    console.error(`replay of script ${file.n}:`, err);
  }
}
// The TypeScript files the run loaded: calibration lets the host strip them for the task's candidates.
writeFileSync(join(DIR, 'loaded.json'), JSON.stringify(loadedTypeScript()));
// Timers or handles a target left open must not keep the replay alive.
process.exit(0);
