import { createFleetView, type FleetView } from '../../placement/fleet-view.ts';
import { type Random, seededRandom } from '../../placement/seeded-random.ts';
import type { SampleTiming } from '../../placement/throughput.ts';
import type { Advert } from '../../protocol/advert.ts';
import type { SimJob, SimNodeSpec, Trace } from './traces.ts';

/** Prefill rate of a speed-1 node, tokens/s. */
export const PREFILL_TOKENS_PER_S = 1000;
/** Decode rate of one request on a speed-1 node, tokens/s (the seed measured 38–40 on an M5 Max). */
export const DECODE_TOKENS_PER_S = 40;
/** Advert interval of the simulated nodes, s. */
export const ADVERT_INTERVAL_S = 2;
/** Time a refused or failed job takes to come back to the submitter (server retries, error), s. */
export const REFUSAL_DELAY_S = 10;
/** Model id every node serves. */
export const MODEL = 'qwen3-coder:30b';

/** A request on a server: one sample of one job. */
interface Req {
  job: SimJob;
  sample: number;
  run: JobRun | null;
  /** Set when the request starts: whether its prompt was cached. */
  hit?: boolean;
  /** Set when the request starts, s. */
  startedAt?: number;
}

/** A job running on a worker (job-placing policies only): some or all samples of one task. */
interface JobRun {
  job: SimJob;
  /** Sample indices this job runs; the first runs alone, the rest once it returns. */
  samples: number[];
  /** Samples returned so far. */
  returned: Set<number>;
}

/** Live state of one simulated node. */
export interface SimNode {
  spec: SimNodeSpec;
  /** Prompts whose prefill completed, most recent first (the server's LRU prompt cache). */
  lru: string[];
  /** Requests waiting for a server slot, FIFO. */
  queue: Req[];
  /** Server slots in use. */
  busy: number;
  /** Jobs waiting at the worker (job policies). */
  jobQueue: JobRun[];
  /** Jobs the worker runs now (job policies). */
  running: Set<JobRun>;
  /** Prompts responses showed cached, newest first, capped at 64 (the advert's warm list). */
  observedWarm: string[];
  /** Requests routed here and not yet returned (what a router tracks). */
  inFlight: number;
  /** Slot-seconds spent. */
  busyTime: number;
  samples: number;
  hits: number;
  prefillTokens: number;
  seq: number;
  /** False while the node is disconnected. */
  up: boolean;
  /** True while the node refuses every job (its model server failing). */
  refusing: boolean;
  /** Bumped on disconnect: events of an older epoch belong to lost work. */
  epoch: number;
}

export interface SimContext {
  nodes: SimNode[];
  /** Fleet view fed with each node's advert every ADVERT_INTERVAL_S. */
  view: FleetView;
  /** Seeded randomness for policies that want it. */
  rand: Random;
  trace: Trace;
}

/** Sends each sample on its own, like an HTTP load balancer in front of the servers. */
export interface SamplePolicy {
  kind: 'sample';
  name: string;
  /** Chooses a node for one sample among the eligible ones (nodes holding the job's workspace). */
  route(job: SimJob, sample: number, eligible: SimNode[], now: number): SimNode;
  /** A sample came back from `node`, with the usage and latency a client would see. */
  returned?(node: SimNode, job: SimJob, sample: number, now: number, timing: SampleTiming): void;
}

/** Sends all k samples of a job to one worker, which warms the prompt then fans out. */
export interface JobPolicy {
  kind: 'job';
  name: string;
  /** Chooses a node for a job running `samples` of the task (it may use the fleet view's adverts). */
  place(job: SimJob, eligible: SimNode[], now: number, samples: readonly number[]): SimNode;
  /** The node just chosen refused the job; the simulator places it again. */
  refused?(node: SimNode, job: SimJob, now: number): void;
  /** The node disconnected: every unfinished (job, samples) the policy believes it held. */
  disconnected?(node: SimNode, now: number): { jobId: string; samples: number[] }[];
  /** A sample of the job came back from `node`, with the usage and latency a client would see. */
  returned?(node: SimNode, job: SimJob, sample: number, now: number, timing: SampleTiming): void;
  /** The whole job finished on `node`. */
  finished?(node: SimNode, job: SimJob, now: number): void;
}

export type Policy = SamplePolicy | JobPolicy;

export interface SimResult {
  policy: string;
  makespan: number;
  prefillTokens: number;
  samples: number;
  hits: number;
  /** Per node: id, samples, busy time per slot (s). */
  perNode: { id: string; samples: number; busyPerSlot: number }[];
  /** Jobs refused by a refusing node. */
  refusals: number;
  /** Samples lost with a disconnected node and placed again. */
  replacedSamples: number;
  /** Distinct (task, sample) results: equals tasks × k when nothing was lost or duplicated. */
  distinctSamples: number;
}

/** A fault injected at a time: a node disconnects (losing its queue and cache) or refuses jobs, until `until`. */
export interface SimFault {
  node: string;
  kind: 'disconnect' | 'refuse';
  /** Start, s. */
  at: number;
  /** End, s: the node rejoins (empty cache) or accepts jobs again. */
  until: number;
}

export interface SimOptions {
  /** Jobs (tasks) in flight at once: the submitter releases the next when one completes. */
  window: number;
  /** Seed for the policy's randomness. */
  seed: number;
  /** Faults to inject (job policies only). */
  faults?: SimFault[];
}

interface Event {
  t: number;
  seq: number;
  kind: 'prefilled' | 'finish' | 'advert' | 'fault-start' | 'fault-end' | 'retry';
  node: SimNode | null;
  req: Req | null;
  epoch: number;
  fault?: SimFault;
  /** For `retry`: the job and samples to place again. */
  retry?: { job: SimJob; samples: number[] };
}

/** Binary min-heap on (t, seq): deterministic order for simultaneous events. */
class Heap {
  private items: Event[] = [];
  get size() {
    return this.items.length;
  }
  push(e: Event) {
    const a = this.items;
    a.push(e);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): Event | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && less(a[l]!, a[m]!)) m = l;
        if (r < a.length && less(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

function less(a: Event, b: Event): boolean {
  return a.t < b.t || (a.t === b.t && a.seq < b.seq);
}

/** The advert a simulated node would gossip now. */
export function advertOf(node: SimNode, now: number): Advert {
  const GiB = 2 ** 30;
  return {
    v: 1,
    peerId: node.spec.id,
    seq: ++node.seq,
    sentAt: Math.round(now * 1000),
    leaving: false,
    version: '0.1.0',
    host: node.spec.id,
    addrs: [],
    models: [
      {
        id: MODEL,
        server: 'llama-server',
        context: 32_768,
        concurrency: node.spec.concurrency,
        loaded: true,
        memoryBytes: 20 * GiB,
      },
    ],
    memory: { total: 64 * GiB, free: 30 * GiB, reserved: 0 },
    load: { queued: node.jobQueue.length, running: node.running.size, capacity: node.spec.concurrency },
    warm: node.observedWarm.map((prompt) => ({ prompt, model: MODEL })),
    workspaces: [...node.spec.workspaces],
    sandbox: { backend: 'bwrap', ok: true },
    roles: [],
  };
}

/**
 * Runs one policy over a trace. Server model: `concurrency` slots, each at node speed; a request
 * whose prompt is in the server's LRU cache (prefill completed earlier) skips the prefill, any other
 * pays the full prompt, including one that starts while another request is still prefilling the
 * same prompt (simultaneous first requests each pay a full prefill). Decode runs at node speed.
 */
export function simulate(
  trace: Trace,
  makePolicy: (ctx: SimContext) => Policy,
  options: SimOptions,
): SimResult {
  const nodes: SimNode[] = trace.nodes.map((spec) => ({
    spec,
    lru: [],
    queue: [],
    busy: 0,
    jobQueue: [],
    running: new Set(),
    observedWarm: [],
    inFlight: 0,
    busyTime: 0,
    samples: 0,
    hits: 0,
    prefillTokens: 0,
    seq: 0,
    up: true,
    refusing: false,
    epoch: 0,
  }));
  const view = createFleetView({ selfPeerId: 'submitter', intervalMs: ADVERT_INTERVAL_S * 1000 });
  const ctx: SimContext = { nodes, view, rand: seededRandom(options.seed), trace };
  const policy = makePolicy(ctx);
  const heap = new Heap();
  let seq = 0;
  const schedule = (
    t: number,
    kind: Event['kind'],
    node: SimNode | null,
    req: Req | null,
    fault?: SimFault,
  ) => heap.push({ t, seq: seq++, kind, node, req, epoch: node?.epoch ?? 0, ...(fault ? { fault } : {}) });

  const k = trace.jobs[0]?.decodeTokens.length ?? 0;
  const finished = new Map<string, Set<number>>();
  let refusals = 0;
  let replacedSamples = 0;
  let distinctSamples = 0;
  let nextJob = 0;
  let inFlightJobs = 0;
  let makespan = 0;
  let done = 0;

  const publishAdverts = (t: number) => {
    for (const node of nodes) if (node.up) view.apply(advertOf(node, t), Math.round(t * 1000));
  };

  const startRequests = (node: SimNode, t: number) => {
    while (node.busy < node.spec.concurrency && node.queue.length > 0) {
      const req = node.queue.shift()!;
      const at = node.lru.indexOf(req.job.prompt);
      const hit = at >= 0;
      if (hit) {
        node.lru.splice(at, 1);
        node.lru.unshift(req.job.prompt);
      }
      const prefillTokens = hit ? 0 : trace.promptTokens;
      const prefill = prefillTokens / (PREFILL_TOKENS_PER_S * node.spec.speed);
      const decode = req.job.decodeTokens[req.sample]! / (DECODE_TOKENS_PER_S * node.spec.speed);
      node.busy++;
      node.busyTime += prefill + decode;
      node.prefillTokens += prefillTokens;
      node.samples++;
      if (hit) node.hits++;
      if (!hit) schedule(t + prefill, 'prefilled', node, req);
      req.hit = hit;
      req.startedAt = t;
      schedule(t + prefill + decode, 'finish', node, req);
    }
  };

  const startJobs = (node: SimNode, t: number) => {
    while (node.running.size < node.spec.concurrency && node.jobQueue.length > 0) {
      const run = node.jobQueue.shift()!;
      node.running.add(run);
      // Warm, then fan out: the first sample alone.
      node.queue.push({ job: run.job, sample: run.samples[0]!, run });
    }
    startRequests(node, t);
  };

  const eligibleFor = (job: SimJob) => nodes.filter((n) => n.up && n.spec.workspaces.includes(job.workspace));

  /** Places a job for `samples` of a task, again and again while the chosen node refuses. */
  const dispatch = (job: SimJob, samples: number[], t: number) => {
    if (policy.kind !== 'job') throw new Error('dispatch is for job policies');
    const eligible = eligibleFor(job);
    if (eligible.length === 0) throw new Error(`no node up holds workspace ${job.workspace} for ${job.id}`);
    const node = policy.place(job, eligible, t, samples);
    if (!node.up) throw new Error(`${policy.name}: placed ${job.id} on ${node.spec.id}, which is down`);
    if (node.refusing) {
      // The failure shows only after the worker's retries give up; then the job is placed again.
      refusals++;
      heap.push({
        t: t + REFUSAL_DELAY_S,
        seq: seq++,
        kind: 'retry',
        node,
        req: null,
        epoch: node.epoch,
        retry: { job, samples },
      });
      return;
    }
    node.inFlight += samples.length;
    node.jobQueue.push({ job, samples, returned: new Set() });
    startJobs(node, t);
  };

  const disconnect = (node: SimNode, t: number) => {
    const lost = new Map<string, number[]>();
    for (const run of [...node.running, ...node.jobQueue]) {
      const open = run.samples.filter((s) => !run.returned.has(s));
      if (open.length > 0) lost.set(run.job.id, open);
    }
    node.up = false;
    node.epoch++;
    node.queue = [];
    node.busy = 0;
    node.running.clear();
    node.jobQueue = [];
    node.lru = [];
    node.observedWarm = [];
    node.inFlight = 0;
    view.remove(node.spec.id);
    if (policy.kind !== 'job') throw new Error('faults are simulated for job policies only');
    // The policy's own bookkeeping (the lease book for vtnode) must name exactly the lost samples.
    const released = policy.disconnected?.(node, t) ?? [];
    const byJob = new Map(released.map((r) => [r.jobId, [...r.samples].sort((a, b) => a - b)]));
    const expected = new Map([...lost].map(([id, open]) => [id, [...open].sort((a, b) => a - b)]));
    if (JSON.stringify([...byJob].sort()) !== JSON.stringify([...expected].sort()))
      throw new Error(
        `${policy.name}: released ${JSON.stringify([...byJob])} but ${node.spec.id} held ${JSON.stringify([...expected])}`,
      );
    for (const [jobId, open] of expected) {
      replacedSamples += open.length;
      dispatch(trace.jobs.find((j) => j.id === jobId)!, open, t);
    }
  };

  const release = (t: number) => {
    while (inFlightJobs < options.window && nextJob < trace.jobs.length) {
      const job = trace.jobs[nextJob++]!;
      inFlightJobs++;
      finished.set(job.id, new Set());
      const eligible = eligibleFor(job);
      if (eligible.length === 0) throw new Error(`no node holds workspace ${job.workspace} for ${job.id}`);
      if (policy.kind === 'sample') {
        for (let s = 0; s < k; s++) {
          const node = policy.route(job, s, eligible, t);
          node.inFlight++;
          node.queue.push({ job, sample: s, run: null });
          startRequests(node, t);
        }
      } else dispatch(job, [...job.decodeTokens.keys()], t);
    }
  };

  publishAdverts(0);
  schedule(ADVERT_INTERVAL_S, 'advert', null, null);
  for (const fault of options.faults ?? []) {
    const node = nodes.find((n) => n.spec.id === fault.node);
    if (!node) throw new Error(`fault names unknown node ${fault.node}`);
    if (!(fault.until > fault.at)) throw new Error(`fault on ${fault.node} must end after it starts`);
    schedule(fault.at, 'fault-start', null, null, fault);
    schedule(fault.until, 'fault-end', null, null, fault);
  }
  release(0);

  const total = trace.jobs.length;
  while (heap.size > 0 && done < total) {
    const e = heap.pop()!;
    const t = e.t;
    if (e.kind === 'advert') {
      publishAdverts(t);
      schedule(t + ADVERT_INTERVAL_S, 'advert', null, null);
      continue;
    }
    if (e.kind === 'retry') {
      const { job, samples } = e.retry!;
      if (policy.kind === 'job') policy.refused?.(e.node!, job, t);
      dispatch(job, samples, t);
      continue;
    }
    if (e.kind === 'fault-start' || e.kind === 'fault-end') {
      const fault = e.fault!;
      const node = nodes.find((n) => n.spec.id === fault.node)!;
      if (fault.kind === 'refuse') node.refusing = e.kind === 'fault-start';
      else if (e.kind === 'fault-start') disconnect(node, t);
      else {
        node.up = true;
        view.apply(advertOf(node, t), Math.round(t * 1000));
      }
      continue;
    }
    const node = e.node!;
    const req = e.req!;
    // Work of a node that disconnected since is lost.
    if (e.epoch !== node.epoch) continue;
    if (e.kind === 'prefilled') {
      const at = node.lru.indexOf(req.job.prompt);
      if (at >= 0) node.lru.splice(at, 1);
      node.lru.unshift(req.job.prompt);
      if (node.lru.length > trace.cacheSlots) node.lru.length = trace.cacheSlots;
      continue;
    }
    // finish
    node.busy--;
    node.inFlight--;
    if (req.hit) {
      const at = node.observedWarm.indexOf(req.job.prompt);
      if (at >= 0) node.observedWarm.splice(at, 1);
      node.observedWarm.unshift(req.job.prompt);
      if (node.observedWarm.length > 64) node.observedWarm.length = 64;
    }
    policy.returned?.(node, req.job, req.sample, t, {
      promptTokens: trace.promptTokens,
      cachedTokens: req.hit ? trace.promptTokens : 0,
      completionTokens: req.job.decodeTokens[req.sample]!,
      latencyMs: (t - req.startedAt!) * 1000,
    });
    const run = req.run;
    if (run) {
      run.returned.add(req.sample);
      if (run.returned.size === 1)
        for (const s of run.samples.slice(1)) node.queue.push({ job: run.job, sample: s, run });
      if (run.returned.size === run.samples.length) {
        node.running.delete(run);
        if (policy.kind === 'job') policy.finished?.(node, run.job, t);
        startJobs(node, t);
      }
    }
    startRequests(node, t);
    const got = finished.get(req.job.id)!;
    if (got.has(req.sample)) throw new Error(`${policy.name}: sample ${req.job.id}/${req.sample} ran twice`);
    got.add(req.sample);
    distinctSamples++;
    if (got.size === k) {
      inFlightJobs--;
      done++;
      makespan = t;
      release(t);
    }
  }
  if (done < total)
    throw new Error(`${policy.name}: simulation stalled with ${total - done} jobs unfinished`);

  return {
    policy: policy.name,
    makespan,
    prefillTokens: nodes.reduce((a, n) => a + n.prefillTokens, 0),
    samples: nodes.reduce((a, n) => a + n.samples, 0),
    hits: nodes.reduce((a, n) => a + n.hits, 0),
    refusals,
    replacedSamples,
    distinctSamples,
    perNode: nodes.map((n) => ({
      id: n.spec.id,
      samples: n.samples,
      busyPerSlot: n.busyTime / n.spec.concurrency,
    })),
  };
}

/** Fewest prefill tokens any placement could use: each distinct prompt prefilled once. */
export function oraclePrefillTokens(trace: Trace): number {
  return new Set(trace.jobs.map((j) => j.prompt)).size * trace.promptTokens;
}

/**
 * Lower bound on the makespan (fluid relaxation): work in speed-1 slot-seconds with the oracle's
 * prefills, spread perfectly over the slots that may run it. With workspaces held by subsets of
 * nodes, the bound is the worst, over every set S of workspaces, of work(S) ÷ throughput of the
 * nodes holding any workspace in S.
 */
export function idealMakespan(trace: Trace): number {
  const workByWs = new Map<string, number>();
  const seen = new Set<string>();
  for (const job of trace.jobs) {
    let work = job.decodeTokens.reduce((a, b) => a + b, 0) / DECODE_TOKENS_PER_S;
    if (!seen.has(job.prompt)) {
      seen.add(job.prompt);
      work += trace.promptTokens / PREFILL_TOKENS_PER_S;
    }
    workByWs.set(job.workspace, (workByWs.get(job.workspace) ?? 0) + work);
  }
  const ws = [...workByWs.keys()];
  let best = 0;
  for (let mask = 1; mask < 1 << ws.length; mask++) {
    const set = ws.filter((_, i) => mask & (1 << i));
    const work = set.reduce((a, w) => a + workByWs.get(w)!, 0);
    const throughput = trace.nodes
      .filter((n) => n.workspaces.some((w) => set.includes(w)))
      .reduce((a, n) => a + n.speed * n.concurrency, 0);
    best = Math.max(best, work / throughput);
  }
  return best;
}
