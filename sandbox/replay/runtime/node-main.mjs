// The replay's node mode: each judged test file's recorded calls are performed in a worker thread of
// its own (a module graph of its own, as the test runner gives each test file), one file after another.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

const DIR = dirname(fileURLToPath(import.meta.url));
const plan = JSON.parse(readFileSync(join(DIR, 'node-plan.json'), 'utf8'));

for (const file of plan.files) {
  await new Promise((resolve) => {
    const worker = new Worker(new URL('./node-file.mjs', import.meta.url), { workerData: file });
    // A file whose replay throws wrote no outputs: the host reports it; the next file still runs.
    worker.on('error', (err) => console.error(`replay of script ${file.n}:`, err));
    worker.on('exit', resolve);
  });
}
process.exit(0);
