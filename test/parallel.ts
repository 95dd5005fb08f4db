// `npm test`: the suite as two vitest processes side by side, the waiting drills (project `drills`,
// listed in vitest.config.ts) beside everything else (project `main`). Each process still runs its
// files one at a time; two cores are then busy while a drill waits for a lease or a fleet to converge.
// Hand-written because vitest runs projects of one group in a single pool, where any two files may
// meet: here a waiting drill only ever runs beside a non-drill file.
//
// With arguments (`npm test -- test/x.test.ts -t name`), it is plain `vitest run ARGS`, in one process.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const vitest = ['node_modules/vitest/vitest.mjs', 'run'];
const args = process.argv.slice(2);

function start(extra: string[], prefix: string | null): ChildProcess {
  const child = spawn(process.execPath, [...vitest, ...extra], {
    stdio: prefix === null ? 'inherit' : ['ignore', 'pipe', 'pipe'],
    detached: prefix !== null,
  });
  if (prefix !== null) {
    for (const stream of [child.stdout, child.stderr]) {
      if (!stream) continue;
      const out = stream === child.stdout ? process.stdout : process.stderr;
      createInterface({ input: stream }).on('line', (line) => out.write(`${prefix} ${line}\n`));
    }
  }
  return child;
}

function exitCode(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

async function main(): Promise<number> {
  if (args.length > 0) return await exitCode(start(args, null));
  const children = [start(['--project', 'drills'], '[drills]'), start(['--project', 'main'], '[main]  ')];
  // Ctrl-C or a CI cancel stops both runs and their fleets (each vitest cleans up its own processes).
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      for (const child of children) {
        try {
          if (child.pid && child.exitCode === null) process.kill(-child.pid, sig);
        } catch {
          // Already gone.
        }
      }
    });
  }
  const codes = await Promise.all(children.map(exitCode));
  process.stdout.write(`\nnpm test: drills exited ${codes[0]}, main exited ${codes[1]}\n`);
  return codes.some((c) => c !== 0) ? 1 : 0;
}

process.exitCode = await main();
