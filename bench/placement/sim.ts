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
  /** A sample of an n = k request after the first: it decodes on the request's KV, no prefill of its own. */
  shared?: boolean;
}

/** A job running on a worker (job-placing policies only): some or all samples of one task. */
interface JobRun {
  job: SimJob;
  /** Sample indices this job runs; the first runs alone, the rest once it returns. */
  samples: number[];
  /** Samples returned so far. */
  returned: Set<number>;
  /**
   * True for one n = k request: the server prefills once for the first sample and, as soon as that
   * prefill completes, the other samples decode on its KV in the node's free slots (ahead of newer
   * requests). False for a worker's job, which fans out only once its first sample returns.
   */
  shared: boolean;
  /** Whether the other samples were released (n = k requests). */
  fanned: boolean;
}

/** Live state of one simulated node. */
export interface SimNode {
  spec: SimNodeSpec;
  /** Prompts whose prefill completed, most recent first (the server's LRU prompt cache). */
  lru: string[];
  /** Requests waiting for a server slot, FIFO. */
  queue: Req[];
  /** Requests holding a slot now. */
  active: Set<Req>;
  /** Requests waiting, without a slot, for an in-flight prefill of their prompt (prefill sharing). */
  parked: Map<string, Req[]>;
  /** Prompts being prefilled now, with how many prefills of each are running. */
  prefilling: Map<string, number>;
  /** n = k requests routed here and not finished. */
  requests: Set<JobRun>;
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
  /** True while the node takes no new work (a laptop on battery): running work goes on. */
  paused: boolean;
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

/** Sends one request with n = k per task (llama-server, vLLM): the server prefills once, then decodes k streams. */
export interface RequestPolicy {
  kind: 'request';
  name: string;
  /** Chooses a node for one request carrying `samples` of the task. */
  route(job: SimJob, samples: readonly number[], eligible: SimNode[], now: number): SimNode;
  /** A sample came back from `node`. */
  returned?(node: SimNode, job: SimJob, sample: number, now: number, timing: SampleTiming): void;
}

/**
 * A central FIFO of tasks: a node's worker takes the next task whose workspace it holds only when it
 * has a free job slot, and runs it like vtnode's worker (warm, then fan out). No affinity.
 */
export interface PullPolicy {
  kind: 'pull';
  name: string;
}

export type Policy = SamplePolicy | JobPolicy | RequestPolicy | PullPolicy;

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

/**
 * A fault injected at a time, until `until`: a node disconnects (losing its queue and cache; one down
 * from time 0 joins at `until`), refuses jobs (job policies only), or pauses (on battery: takes no new
 * work, finishes what it has; its advert shows capacity 0).
 */
export interface SimFault {
  node: string;
  kind: 'disconnect' | 'refuse' | 'pause';
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
  /** Faults to inject besides the trace's own ('refuse' for job policies only). */
  faults?: SimFault[];
  /**
   * In-flight prefill sharing on every server: a request whose prompt is being prefilled on the same
   * server waits (without a slot) for that prefill and then hits the cache, instead of paying again.
   */
  sharePrefill?: boolean;
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
    load: {
      queued: node.jobQueue.length,
      running: node.running.size,
      capacity: node.paused ? 0 : node.spec.concurrency,
    },
    ...(node.paused ? { paused: 'on battery' } : {}),
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
 * same prompt (simultaneous first requests each pay a full prefill) unless `sharePrefill` is on.
 * An n = k request prefills once and decodes its k samples in the node's slots. Decode runs at node
 * speed.
 */
export function simulate(
  trace: Trace,
  makePolicy: (ctx: SimContext) => Policy,
  options: SimOptions,
): SimResult {
  const nodes: SimNode[] = trace.nodes.map(freshNode);
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
  const jobsById = new Map(trace.jobs.map((j) => [j.id, j]));
  const finished = new Map<string, Set<number>>();
  /** Tasks waiting in the pull policy's central FIFO. */
  const pending: { job: SimJob; samples: number[] }[] = [];
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

  /** Releases the other samples of an n = k request: they decode on its KV, ahead of newer requests. */
  const fanOut = (node: SimNode, run: JobRun) => {
    run.fanned = true;
    const rest = run.samples.slice(1).map((s) => ({ job: run.job, sample: s, run, shared: true }));
    node.queue.unshift(...rest);
  };

  const startRequests = (node: SimNode, t: number) => {
    while (node.busy < node.spec.concurrency && node.queue.length > 0) {
      const req = node.queue.shift()!;
      const prompt = req.job.prompt;
      const at = node.lru.indexOf(prompt);
      if (at < 0 && !req.shared && options.sharePrefill && (node.prefilling.get(prompt) ?? 0) > 0) {
        // Wait for the running prefill of this prompt, then hit the cache.
        node.parked.set(prompt, [...(node.parked.get(prompt) ?? []), req]);
        continue;
      }
      const hit = at >= 0 || req.shared === true;
      if (at >= 0) {
        node.lru.splice(at, 1);
        node.lru.unshift(prompt);
      }
      const prefillTokens = hit ? 0 : trace.promptTokens;
      const prefill = prefillTokens / (PREFILL_TOKENS_PER_S * node.spec.speed);
      const decode = req.job.decodeTokens[req.sample]! / (DECODE_TOKENS_PER_S * node.spec.speed);
      node.busy++;
      node.active.add(req);
      node.busyTime += prefill + decode;
      node.prefillTokens += prefillTokens;
      node.samples++;
      if (hit) node.hits++;
      req.hit = hit;
      req.startedAt = t;
      if (!hit) {
        node.prefilling.set(prompt, (node.prefilling.get(prompt) ?? 0) + 1);
        schedule(t + prefill, 'prefilled', node, req);
      } else if (req.run?.shared && !req.run.fanned) fanOut(node, req.run);
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

  const eligibleFor = (job: SimJob) =>
    nodes.filter((n) => n.up && !n.paused && n.spec.workspaces.includes(job.workspace));

  /** Places a job for `samples` of a task, again and again while the chosen node refuses. */
  const dispatch = (job: SimJob, samples: number[], t: number) => {
    if (policy.kind !== 'job') throw new Error('dispatch is for job policies');
    const eligible = eligibleFor(job);
    if (eligible.length === 0) throw new Error(`no node up holds workspace ${job.workspace} for ${job.id}`);
    const node = policy.place(job, eligible, t, samples);
    if (!node.up) throw new Error(`${policy.name}: placed ${job.id} on ${node.spec.id}, which is down`);
    if (node.refusing || node.paused) {
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
    node.jobQueue.push({ job, samples, returned: new Set(), shared: false, fanned: false });
    startJobs(node, t);
  };

  /** Sends one n = k request (or n = the samples still missing, after a loss). */
  const sendRequest = (job: SimJob, samples: number[], t: number) => {
    if (policy.kind !== 'request') throw new Error('sendRequest is for request policies');
    const eligible = eligibleFor(job);
    if (eligible.length === 0) throw new Error(`no node up holds workspace ${job.workspace} for ${job.id}`);
    const node = policy.route(job, samples, eligible, t);
    const run: JobRun = { job, samples, returned: new Set(), shared: true, fanned: false };
    node.requests.add(run);
    node.inFlight += samples.length;
    node.queue.push({ job, sample: samples[0]!, run });
    startRequests(node, t);
  };

  const sendSample = (job: SimJob, sample: number, t: number) => {
    if (policy.kind !== 'sample') throw new Error('sendSample is for sample policies');
    const node = policy.route(job, sample, eligibleFor(job), t);
    node.inFlight++;
    node.queue.push({ job, sample, run: null });
    startRequests(node, t);
  };

  /** Pull policy: every node with a free job slot takes the oldest task whose workspace it holds. */
  const pull = (t: number) => {
    for (const node of nodes) {
      if (!node.up || node.paused || node.refusing) continue;
      while (node.running.size + node.jobQueue.length < node.spec.concurrency) {
        const at = pending.findIndex((p) => node.spec.workspaces.includes(p.job.workspace));
        if (at < 0) break;
        const [{ job, samples }] = pending.splice(at, 1) as [{ job: SimJob; samples: number[] }];
        node.inFlight += samples.length;
        node.jobQueue.push({ job, samples, returned: new Set(), shared: false, fanned: false });
        startJobs(node, t);
      }
    }
  };

  /** Sends `samples` of a task the way the policy sends work. */
  const submit = (job: SimJob, samples: number[], t: number) => {
    if (policy.kind === 'job') dispatch(job, samples, t);
    else if (policy.kind === 'request') sendRequest(job, samples, t);
    else if (policy.kind === 'sample') for (const s of samples) sendSample(job, s, t);
    else pending.push({ job, samples });
  };

  const disconnect = (node: SimNode, t: number) => {
    const lost = lostWork(node);
    resetNode(node);
    view.remove(node.spec.id);
    if (policy.kind === 'job' && policy.disconnected) {
      // The policy's own bookkeeping (the lease book for vtnode) must name exactly the lost samples.
      const released = policy.disconnected(node, t);
      const byJob = new Map(released.map((r) => [r.jobId, [...r.samples].sort((a, b) => a - b)]));
      if (JSON.stringify([...byJob].sort()) !== JSON.stringify([...lost].sort()))
        throw new Error(
          `${policy.name}: released ${JSON.stringify([...byJob])} but ${node.spec.id} held ${JSON.stringify([...lost])}`,
        );
    }
    // A router's client retries the lost requests; the pull queue takes the task back.
    for (const [jobId, open] of lost) {
      replacedSamples += open.length;
      if (policy.kind === 'pull') pending.unshift({ job: jobsById.get(jobId)!, samples: open });
      else submit(jobsById.get(jobId)!, open, t);
    }
  };

  const release = (t: number) => {
    while (inFlightJobs < options.window && nextJob < trace.jobs.length) {
      const job = trace.jobs[nextJob++]!;
      inFlightJobs++;
      finished.set(job.id, new Set());
      if (eligibleFor(job).length === 0)
        throw new Error(`no node up holds workspace ${job.workspace} for ${job.id}`);
      submit(job, [...job.decodeTokens.keys()], t);
    }
  };

  const faultStart = (fault: SimFault, node: SimNode, t: number) => {
    if (fault.kind === 'refuse') node.refusing = true;
    else if (fault.kind === 'pause') node.paused = true;
    else disconnect(node, t);
  };

  const faultEnd = (fault: SimFault, node: SimNode, t: number) => {
    if (fault.kind === 'refuse') node.refusing = false;
    else if (fault.kind === 'pause') node.paused = false;
    else node.up = true;
    if (node.up) view.apply(advertOf(node, t), Math.round(t * 1000));
  };

  const faults = [...(trace.faults ?? []), ...(options.faults ?? [])];
  for (const fault of faults) {
    const node = nodes.find((n) => n.spec.id === fault.node);
    if (!node) throw new Error(`fault names unknown node ${fault.node}`);
    if (!(fault.until > fault.at)) throw new Error(`fault on ${fault.node} must end after it starts`);
    if (fault.kind === 'refuse' && policy.kind !== 'job')
      throw new Error('refusals are simulated for job policies only');
    // A node down or paused from the start is so before the first task.
    if (fault.at <= 0) faultStart(fault, node, 0);
    else schedule(fault.at, 'fault-start', null, null, fault);
    schedule(fault.until, 'fault-end', null, null, fault);
  }
  publishAdverts(0);
  schedule(ADVERT_INTERVAL_S, 'advert', null, null);
  release(0);
  if (policy.kind === 'pull') pull(0);

  /** A request finished on `node`: its run moves on, the task completes when all k samples are in. */
  const finish = (node: SimNode, req: Req, t: number) => {
    node.busy--;
    node.inFlight--;
    node.active.delete(req);
    if (req.hit) {
      const at = node.observedWarm.indexOf(req.job.prompt);
      if (at >= 0) node.observedWarm.splice(at, 1);
      node.observedWarm.unshift(req.job.prompt);
      if (node.observedWarm.length > 64) node.observedWarm.length = 64;
    }
    if (policy.kind !== 'pull')
      policy.returned?.(node, req.job, req.sample, t, {
        promptTokens: trace.promptTokens,
        cachedTokens: req.hit ? trace.promptTokens : 0,
        completionTokens: req.job.decodeTokens[req.sample]!,
        latencyMs: (t - req.startedAt!) * 1000,
      });
    const run = req.run;
    if (run) {
      run.returned.add(req.sample);
      if (!run.shared && run.returned.size === 1)
        for (const s of run.samples.slice(1)) node.queue.push({ job: run.job, sample: s, run });
      if (run.returned.size === run.samples.length) {
        if (run.shared) node.requests.delete(run);
        else {
          node.running.delete(run);
          if (policy.kind === 'job') policy.finished?.(node, run.job, t);
          startJobs(node, t);
        }
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
  };

  /** A prefill completed: the prompt enters the cache, its n = k request fans out, waiters hit. */
  const prefilled = (node: SimNode, req: Req, t: number) => {
    const prompt = req.job.prompt;
    const at = node.lru.indexOf(prompt);
    if (at >= 0) node.lru.splice(at, 1);
    node.lru.unshift(prompt);
    if (node.lru.length > trace.cacheSlots) node.lru.length = trace.cacheSlots;
    const running = (node.prefilling.get(prompt) ?? 1) - 1;
    if (running > 0) node.prefilling.set(prompt, running);
    else node.prefilling.delete(prompt);
    if (req.run?.shared && !req.run.fanned) fanOut(node, req.run);
    const waiting = node.parked.get(prompt);
    if (waiting) {
      node.parked.delete(prompt);
      node.queue.unshift(...waiting);
    }
    startRequests(node, t);
  };

  const total = trace.jobs.length;
  while (heap.size > 0 && done < total) {
    const e = heap.pop()!;
    const t = e.t;
    if (e.kind === 'advert') {
      publishAdverts(t);
      schedule(t + ADVERT_INTERVAL_S, 'advert', null, null);
    } else if (e.kind === 'retry') {
      const { job, samples } = e.retry!;
      if (policy.kind === 'job') policy.refused?.(e.node!, job, t);
      dispatch(job, samples, t);
    } else if (e.kind === 'fault-start' || e.kind === 'fault-end') {
      const node = nodes.find((n) => n.spec.id === e.fault!.node)!;
      if (e.kind === 'fault-start') faultStart(e.fault!, node, t);
      else faultEnd(e.fault!, node, t);
    } else if (e.epoch === e.node!.epoch) {
      // Work of a node that disconnected since is lost.
      if (e.kind === 'prefilled') prefilled(e.node!, e.req!, t);
      else finish(e.node!, e.req!, t);
    }
    if (policy.kind === 'pull') pull(t);
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

function freshNode(spec: SimNodeSpec): SimNode {
  return {
    spec,
    lru: [],
    queue: [],
    active: new Set(),
    parked: new Map(),
    prefilling: new Map(),
    requests: new Set(),
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
    paused: false,
    epoch: 0,
  };
}

/** Unfinished samples a node holds, by task id, sorted: its jobs, n = k requests and lone requests. */
function lostWork(node: SimNode): Map<string, number[]> {
  const lost = new Map<string, Set<number>>();
  const add = (jobId: string, samples: Iterable<number>) => {
    const set = lost.get(jobId) ?? new Set();
    for (const s of samples) set.add(s);
    if (set.size > 0) lost.set(jobId, set);
  };
  for (const run of [...node.running, ...node.jobQueue, ...node.requests])
    add(
      run.job.id,
      run.samples.filter((s) => !run.returned.has(s)),
    );
  const lone = [...node.queue, ...node.active, ...[...node.parked.values()].flat()].filter((r) => !r.run);
  for (const req of lone) add(req.job.id, [req.sample]);
  return new Map([...lost].map(([id, set]) => [id, [...set].sort((a, b) => a - b)]));
}

/** A disconnect: the node loses its queues, running work and cache; events of the old epoch are void. */
function resetNode(node: SimNode): void {
  node.up = false;
  node.epoch++;
  node.queue = [];
  node.active.clear();
  node.parked.clear();
  node.prefilling.clear();
  node.requests.clear();
  node.busy = 0;
  node.running.clear();
  node.jobQueue = [];
  node.lru = [];
  node.observedWarm = [];
  node.inFlight = 0;
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
