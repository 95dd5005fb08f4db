/**
 * Placement cost: CPU of the submitter's placement tick (placement/tick.ts `placeTick`, as
 * node/submitter/runner.ts runs it, with the real placer, lease book, reputation and throughput) on a
 * synthetic fleet of 10 / 100 / 1,000 nodes (4 slots each, all full) and 100,000 queued (task, model)
 * jobs. Each measured tick first frees `--free` slots (their jobs finish), then places; an idle tick
 * (no slot free) is measured too, after each; two warm-up ticks are not counted. CPU is process.cpuUsage (user + system) around the tick only.
 *
 *   npx node bench/placement-cost.ts [--nodes 10,100,1000] [--queued 100000] [--ticks 5] [--free 5] [--json]
 */
import { parseArgs } from 'node:util';
import { createFleetView } from '../placement/fleet-view.ts';
import { createLeaseBook } from '../placement/lease-book.ts';
import { createPlacer } from '../placement/placer.ts';
import { createReputation } from '../placement/reputation.ts';
import { createThroughput } from '../placement/throughput.ts';
import { placeTick, type TickInput } from '../placement/tick.ts';
import type { Advert } from '../protocol/advert.ts';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '10,100,1000' },
    queued: { type: 'string', default: '100000' },
    ticks: { type: 'string', default: '5' },
    free: { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
  },
});
const sizes = values.nodes.split(',').map(Number);
const queued = Number(values.queued);
const ticks = Number(values.ticks);
const free = Number(values.free);
const SLOTS = 4;
const K = 10;
const MODEL = 'qwen3-coder:30b';
const WS = `sha256:${'a'.repeat(64)}`;
const GiB = 2 ** 30;

function advert(peerId: string): Advert {
  return {
    v: 1,
    peerId,
    seq: 1,
    sentAt: 0,
    leaving: false,
    version: '0.1.0',
    host: peerId,
    addrs: [],
    models: [
      { id: MODEL, server: 'ollama', context: 32768, concurrency: 2, loaded: true, memoryBytes: 20 * GiB },
    ],
    memory: { total: 64 * GiB, free: 40 * GiB, reserved: 0 },
    load: { queued: 0, running: 0, capacity: SLOTS },
    warm: [],
    workspaces: [WS],
    sandbox: { backend: 'bwrap', ok: true },
    roles: [],
  };
}

const hex = (i: number) => i.toString(16).padStart(64, '0');
const cpuMs = (start: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
};

function measure(n: number) {
  const now = 1_000_000;
  const view = createFleetView({ selfPeerId: 'p0', intervalMs: 5000 });
  const peers = Array.from({ length: n }, (_, i) => `p${i}`);
  for (const p of peers) view.apply(advert(p), now);
  const reputation = createReputation();
  const throughput = createThroughput();
  // Half the fleet measured (the others get the model's median rate), as after a first campaign.
  for (const [i, p] of peers.entries())
    if (i % 2 === 0)
      throughput.record(p, MODEL, {
        promptTokens: 1000,
        cachedTokens: 0,
        completionTokens: 500,
        latencyMs: 5000 + i,
      });
  const placer = createPlacer({ reputation, weight: throughput.weight, epsilon: 0.1 });
  const book = createLeaseBook({ maxAttempts: 5 });
  const tasks = new Map<string, { id: string; promptFingerprint: string; workspace: { id: string } }>();
  const samples = Array.from({ length: K }, (_, i) => i);
  for (let i = 0; i < queued + n * SLOTS; i++) {
    const id = `t${i}`;
    tasks.set(id, { id, promptFingerprint: `sha256:${hex(i)}`, workspace: { id: WS } });
    book.add(id, MODEL, samples);
  }
  // Every slot full (not measured): the first n × SLOTS jobs, SLOTS per node.
  const running: string[] = [];
  for (let i = 0; i < n * SLOTS; i++)
    running.push(book.lease(`t${i}`, MODEL, peers[i % n]!, now, now + 60_000)!.jobId);
  const input = (at: number): TickInput<typeof tasks extends Map<string, infer T> ? T : never> => ({
    book,
    placer,
    tasks,
    nodes: view.nodes(),
    room: { selfPeerId: 'p0', proven: new Set(peers), busyUntil: new Map() },
    now: at,
    deadline: at + 60_000,
  });
  const finish = (count: number) => {
    for (const jobId of running.splice(0, count)) for (const s of samples) book.result(jobId, s);
  };

  /** One tick after `count` jobs finished; its CPU, ms. */
  const tickAfter = (count: number, at: number): number => {
    finish(count);
    const start = process.cpuUsage();
    const tick = placeTick(input(at));
    const spent = cpuMs(start);
    running.push(...tick.decisions.map((d) => d.lease.jobId));
    if (tick.decisions.length !== count)
      throw new Error(`a tick placed ${tick.decisions.length} jobs, expected ${count} (the freed slots)`);
    return spent;
  };
  // Warm-up (not counted): the first calls compile the code; the setup's garbage is collected.
  for (let t = 0; t < 2; t++) tickAfter(free, now + t);
  let cpu = 0;
  let idleCpu = 0;
  for (let t = 0; t < ticks; t++) {
    cpu += tickAfter(free, now + (t + 1) * 1000);
    idleCpu += tickAfter(0, now + (t + 1) * 1000 + 500);
  }
  const decisions = ticks * free;
  idleCpu /= ticks;
  return {
    nodes: n,
    queued,
    cpuMsPerTick: round(cpu / ticks),
    cpuMsPerDecision: round(cpu / decisions),
    decisionsPerTick: free,
    idleCpuMsPerTick: round(idleCpu),
  };
}

const round = (x: number) => Math.round(x * 1000) / 1000;

const rows = sizes.map(measure);
if (values.json) console.log(JSON.stringify({ rows }));
else {
  console.log(
    `placement tick CPU, ${queued} queued jobs, ${SLOTS} slots per node (all full), ${free} freed per tick`,
  );
  console.log('nodes   ms/tick   ms/decision   idle ms/tick   % of a core at 10 decisions/s');
  for (const r of rows)
    console.log(
      `${String(r.nodes).padStart(5)} ${r.cpuMsPerTick.toFixed(2).padStart(9)} ${r.cpuMsPerDecision.toFixed(2).padStart(13)} ${r.idleCpuMsPerTick.toFixed(2).padStart(14)} ${r.cpuMsPerDecision.toFixed(2).padStart(14)} %`,
    );
}
