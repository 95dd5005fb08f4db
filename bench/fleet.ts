// Fleet benchmark: 8 vtnode processes on loopback.
//   npx node bench/fleet.ts [--nodes 8]
// Prints the time until every node sees all N (÷ the time one node takes to start and answer
// `status`, measured in the same run), advert propagation p50/p99, and idle RSS per node
// (÷ the RSS of a bare Node process measured in the same run).
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { sleep } from '../node/async/sleep.ts';
import { connectControl } from '../node/control/client.ts';
import { DataDir } from '../node/data-dir.ts';
import type { FleetStatus } from '../node/status.ts';
import { eventually, Sandbox } from '../test/helpers/cli.ts';
import { initFleet, joinNode, peerIdOf, startNode } from '../test/helpers/fleet.ts';

const { values } = parseArgs({ options: { nodes: { type: 'string', default: '8' } } });
const n = Number(values.nodes);
const box = new Sandbox();

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function bareNodeRss(): Promise<number> {
  const child = spawn(
    process.execPath,
    ['-e', 'setTimeout(() => console.log(process.memoryUsage().rss), 1000)'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  await new Promise((r) => child.on('exit', r));
  return Number(out.trim());
}

try {
  const baselineRss = await bareNodeRss();

  // Baseline: one node alone, from spawn to answering status.
  const solo = await initFleet(box, 'solo');
  let t0 = performance.now();
  startNode(box, solo.dataDir);
  await peerIdOf(solo.dataDir);
  const soloMs = performance.now() - t0;

  const { dataDir, token } = await initFleet(box, 'bench');
  t0 = performance.now();
  startNode(box, dataDir);
  const dirs = [dataDir];
  const joins = await Promise.all(Array.from({ length: n - 1 }, () => joinNode(box, token)));
  dirs.push(...joins.map((j) => j.dataDir));
  // Poll in-process through the control channel: spawning `vtnode status` would load the 2 cores.
  const seen = async (d: string) => {
    const control = await connectControl(new DataDir(d));
    return (await control.call<FleetStatus>('GET', '/status')).nodes.length === n;
  };
  await Promise.all(dirs.map((d) => eventually(() => seen(d), 120_000, `${d} to see ${n} nodes`)));
  const convergeMs = performance.now() - t0;
  const convergedAt = Date.now();

  // Let the fleet idle for a few advert intervals, then read every node's metrics.
  await sleep(8000);
  const delays: number[] = [];
  const rss: number[] = [];
  for (const d of dirs) {
    const control = await connectControl(new DataDir(d));
    const m = await control.call<{ rss: number; adverts: [number, number][] }>('GET', '/metrics');
    // Steady state only: adverts received once the whole fleet had formed.
    delays.push(...m.adverts.filter(([at]) => at > convergedAt + 1000).map(([, delay]) => delay));
    rss.push(m.rss);
  }
  delays.sort((a, b) => a - b);
  const meanRss = rss.reduce((a, b) => a + b, 0) / rss.length;
  const MiB = 1024 * 1024;
  console.log(`nodes: ${n} (advert interval 1 s, loopback, ${new Date().toISOString()})`);
  console.log(
    `baseline: one node ready in ${soloMs.toFixed(0)} ms; bare Node RSS ${(baselineRss / MiB).toFixed(1)} MiB`,
  );
  console.log(
    `all ${n} see all ${n}: ${convergeMs.toFixed(0)} ms  (${(convergeMs / soloMs).toFixed(2)}x one node's start)`,
  );
  console.log(
    `advert propagation: p50 ${percentile(delays, 50)} ms, p99 ${percentile(delays, 99)} ms, max ${delays.at(-1)} ms (${delays.length} adverts)`,
  );
  console.log(
    `idle RSS per node: mean ${(meanRss / MiB).toFixed(1)} MiB, max ${(Math.max(...rss) / MiB).toFixed(1)} MiB (${(meanRss / baselineRss).toFixed(2)}x bare Node)`,
  );
} finally {
  await box.cleanup();
}
