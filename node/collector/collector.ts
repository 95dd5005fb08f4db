import { join } from 'node:path';
import { createHistogram } from 'node:perf_hooks';
import { type Digest, MAX_LOG_DIGESTS_PER_FRAME, type SignedDigest } from '../../protocol/digest.ts';
import { MAX_SAMPLES_PER_REQUEST, type OriginSummary, type SampleReply } from '../../protocol/fetch.ts';
import { sampleId } from '../../protocol/job.ts';
import { contentHash, type SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
import { type TaskReply, taskRowMismatch } from '../../protocol/task-fetch.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { sleep } from '../async/sleep.ts';
import { fetchBodies, fetchDigests, fetchOrigins } from '../digests/servers.ts';
import { checkRelayed } from '../digests/signature.ts';
import { fetchTaskRows } from '../digests/task-server.ts';
import { logger } from '../logger.ts';
import { metrics } from '../metrics.ts';
import type { StreamHost } from '../wire/streams.ts';
import { planCatchUp, summaryKey, worthPulling } from './catch-up.ts';
import { claimsAgree } from './claims.ts';
import { createFetchQueue } from './fetch-queue.ts';
import { type Claim, DATASET_DB, type DatasetStore } from './store.ts';
import { type OriginTrust, selectedForAudit, trustOf } from './trust.ts';

/** Re-scores a candidate in the collector's own sandbox; null when it cannot (workspace not held). */
export interface Auditor {
  audit(task: Task, body: SampleBody, signal?: AbortSignal): Promise<{ reward: number } | null>;
}

/** An Auditor over a sandbox Scorer and the workspaces this node holds (content id → dir). */
export function scorerAuditor(scorer: Scorer, workspaces: ReadonlyMap<string, string>): Auditor {
  return {
    async audit(task, body, signal) {
      const workspaceDir = workspaces.get(task.workspace.id);
      if (!workspaceDir) return null;
      const r = await scorer.score({
        task,
        workspaceDir,
        candidate: body.candidate,
        truncated: body.generation.truncated,
        signal,
      });
      // An infrastructure failure is not a verdict on the origin: the audit did not happen.
      if (r.status === 'error' || r.reward === null) throw new Error(`the audit could not score: ${r.error}`);
      return { reward: r.reward };
    },
  };
}

/**
 * Why a body served for a digest's row does not match the digest; null when it matches. A reply is
 * only ever compared with the digest of the (origin, seq) it names: another row of the same sample
 * id (an honest redo by another worker) is another claim, never a mismatch.
 */
export function bodyMismatch(digest: Digest, reply: SampleReply): string | null {
  const b = reply.body;
  if (reply.origin !== digest.origin) return `origin is ${reply.origin}, the digest's is ${digest.origin}`;
  if (reply.seq !== digest.seq) return `seq is ${reply.seq}, the digest's is ${digest.seq}`;
  const derived = sampleId(b.taskId, b.model, b.index, b.generation.seed);
  if (derived !== b.sampleId)
    return `sampleId ${b.sampleId} is not the id of its own task, model, index and seed (${derived})`;
  const hash = contentHash(b.candidate);
  if (hash !== digest.contentHash)
    return `candidate hashes to ${hash}, the digest says ${digest.contentHash}`;
  if (b.contentHash !== digest.contentHash)
    return `body contentHash ${b.contentHash} differs from the digest's`;
  if (b.sampleId !== digest.sampleId) return `sampleId ${b.sampleId} differs from the digest's`;
  if (b.taskId !== digest.taskId) return `taskId ${b.taskId} differs from the digest's ${digest.taskId}`;
  if (b.model !== digest.model) return `model ${b.model} differs from the digest's ${digest.model}`;
  if (b.split !== digest.split) return `split ${b.split} differs from the digest's ${digest.split}`;
  if (b.score.reward !== digest.reward)
    return `reward ${b.score.reward} differs from the digest's ${digest.reward}`;
  if (b.score.evalFingerprint !== digest.evalFingerprint)
    return `evalFingerprint ${b.score.evalFingerprint} differs from the digest's`;
  return null;
}

export interface CollectorOptions {
  /** Host the collector fetches over (/vtnode/sample/2, /vtnode/log/2). */
  host: StreamHost;
  /** Peer ids of the fleet members to catch up from (and to ask for bodies an origin cannot serve). */
  peers: () => string[];
  /** The dataset dir. */
  store: DatasetStore;
  /** Fraction of samples re-scored, whatever their claimed reward (default 0.05). */
  auditFraction?: number;
  /** Re-scores samples; none = no audits. */
  auditor?: Auditor | null;
  /** How often to catch up with every peer, ms (default 30 s; 0 = only when asked). */
  catchUpIntervalMs?: number;
  /** Delay before a batch of gossiped digests is fetched, ms (default 50). */
  fetchDelayMs?: number;
  /** Bodies fetched at once (parallel streams, default 4). */
  fetchConcurrency?: number;
  /** Other holders tried when the origin cannot serve a body (default 3; known holders first). */
  maxOtherHolders?: number;
  /** Stops the collector. */
  signal?: AbortSignal;
  /**
   * The dataset's storage health (a full disk): while blocked, nothing is fetched or stored
   * (gossiped digests are dropped; catch-up fetches them from the fleet once it resumes).
   */
  storage?: StorageHealth;
  /**
   * Called with a peer that provably lied (served a task row that does not hash to the hash its
   * origin signed): the daemon's offence ledger (node/wire/offences.ts). It also counts as a
   * conflict against the peer in the dataset, whatever this does.
   */
  onOffence?: (peer: string, why: string) => void;
}

/** Whether the dataset can take writes (node/storage/disk-guard.ts behind it). */
export interface StorageHealth {
  /** Why nothing can be stored now, or null when it can. */
  blocked(): string | null;
  /** Reports a failed write of `path`: true when it was a storage fault (the health then says so). */
  failed(err: unknown, path: string): boolean;
}

export interface CollectorStats {
  /** Signed digests held, one per (origin, seq): a sample two nodes both finished counts twice. */
  digests: number;
  /** Distinct sample ids among them. */
  samples: number;
  /** Rows whose audit ran (held in the dataset, so it survives a restart). */
  audited: number;
  bodies: number;
  pending: number;
  rejected: number;
  /** Audits run since this collector started, and how many of them failed. */
  audits: number;
  auditFailures: number;
  fetchErrors: number;
  /** Task rows served that did not hash to the hash their origin signed (each counted against the server). */
  taskRowsRejected: number;
  /** Task hashes the held digests name whose rows no node has served yet (their samples are not exported). */
  taskRowsMissing: number;
  /**
   * Lag from a sample's scoring at its origin (its body's scoredAt, the origin's clock) to its body
   * being stored here, over the bodies fetched since this collector started: median and 99th
   * percentile, ms (null before the first).
   */
  lagP50Ms: number | null;
  lagP99Ms: number | null;
}

export interface Collector {
  /** Feeds a digest (from gossip, already validated: origin = signer, signature verified). */
  onDigest(digest: SignedDigest): void;
  /** Asks every peer which origins it holds, pulls the digests we lack from any of them, then fetches missing bodies. */
  catchUp(signal?: AbortSignal): Promise<void>;
  /** Fetches every pending body it can. */
  fetchPending(signal?: AbortSignal): Promise<void>;
  /** Resolves once queued fetches and audits are done. */
  idle(): Promise<void>;
  /** Trust per origin. */
  trust(): OriginTrust[];
  stats(): CollectorStats;
  /** Starts the periodic catch-up (the first one runs at once). */
  start(): void;
  stop(): Promise<void>;
}

/** Runs `jobs` with at most `n` at once, stopping early once `signal` aborts. */
async function pool<T>(items: readonly T[], n: number, signal: AbortSignal, job: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length && !signal.aborted) await job(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
}

const rowKey = (d: { origin: string; seq: number }) => `${d.origin}#${d.seq}`;

/**
 * The collector: stores every signed digest it learns of (gossip, or catch-up from the origin or any
 * node that holds it), fetches and verifies the bodies, audits a fraction of samples (every reward,
 * so deflation is caught as well as inflation) and every claim of a sample id whose claims disagree,
 * and keeps trust per origin. All state lives in the dataset store, so a restarted collector resumes
 * from its high-water marks.
 */
export function createCollector(options: CollectorOptions): Collector {
  const log = logger('vtnode:collector');
  const { host, store } = options;
  const auditFraction = options.auditFraction ?? 0.05;
  const auditor = options.auditor ?? null;
  const fetchDelayMs = options.fetchDelayMs ?? 50;
  const concurrency = Math.max(1, options.fetchConcurrency ?? 4);
  const maxOthers = options.maxOtherHolders ?? 3;
  const stopper = new AbortController();
  const stopSignal = options.signal ? AbortSignal.any([options.signal, stopper.signal]) : stopper.signal;
  const stats = { audits: 0, auditFailures: 0, fetchErrors: 0, taskRowsRejected: 0 };
  /** Scoring-to-stored lag of every body fetched (an HDR histogram: constant memory, 3 significant digits). */
  const lag = createHistogram();
  const blocked = () => options.storage?.blocked() ?? null;
  /** True when `err` was a storage fault (the write did not happen; the health now says why). */
  const storageFault = (err: unknown) => options.storage?.failed(err, join(store.dir, DATASET_DB)) ?? false;
  const withStop = (signal?: AbortSignal) => (signal ? AbortSignal.any([signal, stopSignal]) : stopSignal);
  const self = (): string => (host as { peerId?: { toString(): string } }).peerId?.toString() ?? '';
  let tasks = store.tasks();
  let rows = store.taskRows();
  let tasksLoadedAt = Date.now();
  const reloadTasks = () => {
    tasks = store.tasks();
    rows = store.taskRows();
    tasksLoadedAt = Date.now();
  };
  /** A v2 digest's task: the row its signed hash names, nothing else; a v1 digest's: by task id. */
  const lookup = (d: Digest): Task | undefined =>
    d.taskHash !== undefined ? rows.get(d.taskHash)?.task : tasks.get(d.taskId);

  const taskOf = (d: Digest): Task | undefined => {
    let t = lookup(d);
    if (!t && Date.now() - tasksLoadedAt > 5000) {
      // Tasks may be added to the dataset while it runs (`vtnode collect --tasks` on restart).
      reloadTasks();
      t = lookup(d);
    }
    return t;
  };

  const suspect = (origin: string): boolean => {
    const r = store.origin(origin);
    return r ? trustOf({ ...r, samples: 0 }).suspect : false;
  };

  /** The claims of a sample id when they disagree (every side is then audited, whatever its reward), else null. */
  const contested = (id: string): Claim[] | null => {
    const claims = store.claimsOf(id);
    return claims.length > 1 && !claimsAgree(claims.map((c) => c.digest)) ? claims : null;
  };

  // ---- audits: one at a time (a sandbox run is CPU-heavy) ----
  const auditQueue: SignedDigest[] = [];
  const auditQueued = new Set<string>();
  let auditing: Promise<void> | null = null;

  const wantsAudit = (d: Digest): boolean =>
    auditor !== null &&
    (selectedForAudit(d.sampleId, auditFraction) || suspect(d.origin) || contested(d.sampleId) !== null);

  const queueAudit = (d: SignedDigest) => {
    if (!auditor || !taskOf(d)) return;
    if (!auditQueued.has(rowKey(d))) {
      auditQueued.add(rowKey(d));
      auditQueue.push(d);
    }
    // Also for a row queued already: a drain that stopped on a full disk left it waiting, and the
    // next call (each catch-up re-queues every unaudited row) starts the drain again.
    auditing ??= runAudits().finally(() => {
      auditing = null;
    });
  };

  /** A new claim of a sample id others claimed differently: the claims held with bodies are audited now. */
  const auditContested = (added: readonly SignedDigest[]) => {
    if (!auditor) return;
    for (const d of added)
      for (const c of contested(d.sampleId) ?? [])
        if (c.bodyState === 'ok' && c.audit === 'none') queueAudit(c.digest);
  };

  async function auditOne(d: SignedDigest): Promise<void> {
    const s = store.sample(d.origin, d.seq);
    const task = taskOf(d);
    if (!s?.body || s.audit !== 'none' || !task) return;
    let result: { reward: number } | null;
    try {
      result = await auditor!.audit(task, s.body, stopSignal);
    } catch (err) {
      if (!stopSignal.aborted) log.warn(`audit of ${d.sampleId} failed to run: ${(err as Error).message}`);
      return;
    }
    if (!result) return;
    const passed = Math.abs(result.reward - d.reward) <= 1e-9;
    try {
      store.recordAudit(d, passed, result.reward);
    } catch (err) {
      // Not recorded: the sample stays unaudited and is queued again once the disk has space.
      if (storageFault(err)) return;
      throw err;
    }
    stats.audits++;
    if (passed) return;
    stats.auditFailures++;
    const n = store.quarantineOrigin(d.origin);
    log.warn(
      `audit: ${d.origin} claimed reward ${d.reward} for ${d.sampleId} (task ${d.taskId}), the re-score gave ${result.reward}; ${n} of its samples quarantined until re-verified`,
    );
    // A suspect origin gets every sample audited, whatever reward it claimed.
    for (const other of store.unaudited()) if (other.origin === d.origin) queueAudit(other);
  }

  async function runAudits(): Promise<void> {
    while (auditQueue.length > 0 && !stopSignal.aborted && !blocked()) {
      const d = auditQueue.shift()!;
      auditQueued.delete(rowKey(d));
      await auditOne(d);
    }
  }

  // ---- bodies ----
  const queued = new Map<string, SignedDigest>();
  let flushTimer: NodeJS.Timeout | null = null;
  /** Peers whose /vtnode/log/2 index listed an origin: they hold (some of) its rows. */
  const holders = new Map<string, Set<string>>();

  /** Stores digests (one transaction); returns the new ones. */
  const addDigests = (digests: readonly SignedDigest[], from: string): SignedDigest[] => {
    const results = store.addDigests(digests);
    const added = digests.filter((d, i) => {
      if (results[i] === 'conflict')
        log.warn(
          `${d.origin} signed two different digests for seq ${d.seq} or sample ${d.sampleId} (via ${from})`,
        );
      return results[i] === 'new';
    });
    auditContested(added);
    return added;
  };

  const scheduleFlush = () => {
    if (flushTimer || stopSignal.aborted) return;
    flushTimer = setTimeout(() => {
      flushTimer = null;
      // Gossiped digests are stored in one transaction per batch (a durable commit each would cost a flush each).
      const incoming = [...queued.values()];
      queued.clear();
      // Dropped while the disk is full: catch-up gets them from the fleet once it has space.
      if (blocked()) return;
      let batch: SignedDigest[];
      try {
        batch = addDigests(incoming, 'gossip');
      } catch (err) {
        if (storageFault(err)) return;
        throw err;
      }
      bodies.add(batch);
    }, fetchDelayMs);
  };

  /**
   * Checks a body served for a digest's (origin, seq): null when it matches, else why. A mismatch is a
   * lie by whoever served it: the origin (its body is rejected) or another holder (a conflict against it).
   */
  const check = (d: SignedDigest, reply: SampleReply, from: string): string | null => {
    const why = bodyMismatch(d, reply);
    if (why) {
      log.warn(`rejected the body of ${rowKey(d)} (sample ${d.sampleId}) from ${from}: ${why}`);
      if (from === d.origin) store.rejectBody(d);
      else store.noteConflict(from);
    }
    return why;
  };

  /** Bodies wanted, fetched from their origin first, then from other holders; rows coalesce per origin. */
  const bodies = createFetchQueue({
    concurrency,
    batch: MAX_SAMPLES_PER_REQUEST,
    fetch: (origin, rows) => fetchBatch(origin, rows, stopSignal),
    onError(err) {
      // Not stored: the bodies stay pending and are fetched again by the next catch-up.
      if (storageFault(err) || stopSignal.aborted) return;
      log.warn(`fetching bodies failed: ${(err as Error).message}`);
    },
  });

  /** Queues the bodies of digests and resolves once every queued fetch is done (or `signal` aborts). */
  async function fetchAll(digests: readonly SignedDigest[], signal: AbortSignal): Promise<void> {
    bodies.add(digests);
    if (signal.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      signal.addEventListener('abort', done, { once: true });
      void bodies.drained().then(done);
    });
  }

  /**
   * Who may hold an origin's rows, in the order asked: the origin while it is a fleet member, peers
   * that listed the origin in their index, other peers; an origin no longer in the fleet last.
   */
  const holdersOf = (origin: string): string[] => {
    const me = self();
    const peers = [...options.peers()].sort();
    const known = [...(holders.get(origin) ?? [])].sort();
    const others = [...new Set([...known, ...peers])].filter((p) => p !== origin && p !== me);
    const chosen = others.slice(0, maxOthers);
    return peers.includes(origin) ? [origin, ...chosen] : [...chosen, origin];
  };

  async function fetchBatch(origin: string, batch: SignedDigest[], signal: AbortSignal): Promise<void> {
    let missing = batch.filter((d) => store.sample(d.origin, d.seq)?.bodyState === 'pending');
    for (const holder of holdersOf(origin)) {
      if (missing.length === 0 || signal.aborted || blocked()) return;
      let replies: SampleReply[];
      try {
        replies = await fetchBodies(host, holder, missing, { signal });
      } catch (err) {
        stats.fetchErrors++;
        log('fetching %d bodies from %s failed: %s', missing.length, holder, (err as Error).message);
        continue;
      }
      const byKey = new Map(missing.map((d) => [rowKey(d), d]));
      const settled = new Set<string>();
      const accepted: { digest: SignedDigest; body: SampleBody }[] = [];
      for (const reply of replies) {
        // fetchBodies returns only rows asked for: each reply claims exactly one digest's row.
        const d = byKey.get(rowKey(reply));
        if (!d) continue;
        if (check(d, reply, holder) === null) {
          accepted.push({ digest: d, body: reply.body });
          settled.add(rowKey(d));
        } else if (holder === origin) settled.add(rowKey(d)); // rejected by its origin: not asked again
      }
      // One transaction per reply: a durable commit per body would cost a disk flush each.
      store.putBodies(accepted);
      const now = Date.now();
      for (const { body, digest } of accepted) {
        lag.record(Math.max(1, Math.round(now - body.scoredAt)));
        const m = metrics();
        m.collectorLag.observe(
          { origin: m.originLabel(digest.origin) },
          Math.max(0, now - body.scoredAt) / 1000,
        );
      }
      for (const { digest } of accepted) if (wantsAudit(digest)) queueAudit(digest);
      // Their task rows, unless held (fetched once per hash, from the nodes that ran the jobs first).
      if (accepted.some(({ digest }) => digest.taskHash !== undefined && !rows.has(digest.taskHash)))
        void tasksSoon();
      missing = missing.filter((d) => !settled.has(rowKey(d)));
    }
  }

  // ---- task rows ----
  /**
   * Who to ask for task rows, in order: the origins that signed them while fleet members (they ran
   * the jobs), then other members (a collector relays verified rows), then origins gone from the fleet.
   */
  const taskHolders = (origins: ReadonlySet<string>): string[] => {
    const me = self();
    const peers = [...options.peers()].filter((p) => p !== me).sort();
    const present = peers.filter((p) => origins.has(p));
    const gone = [...origins].filter((o) => o !== me && !peers.includes(o)).sort();
    return [...present, ...peers.filter((p) => !origins.has(p)), ...gone];
  };

  /** `${peer}\n${hash}` of the false rows peers served: that peer is not asked for that row again. */
  const liedAbout = new Set<string>();

  /** Checks and keeps the rows one peer served; returns the hashes settled. */
  const acceptTaskRows = (peer: string, replies: readonly TaskReply[]): string[] => {
    const settled: string[] = [];
    for (const reply of replies) {
      const why = taskRowMismatch(reply.hash, reply);
      if (why) {
        liedAbout.add(`${peer}\n${reply.hash}`);
        stats.taskRowsRejected++;
        store.noteConflict(peer);
        options.onOffence?.(peer, `served a false task row (${why}) on /vtnode/task/1`);
        log.warn(`rejected task row ${reply.hash} (task ${reply.task.id}) from ${peer}: ${why}`);
        continue;
      }
      store.putTaskRow(reply.hash, reply.task, peer);
      settled.push(reply.hash);
    }
    return settled;
  };

  /**
   * Fetches the task rows the dataset's v2 digests name and it lacks, from the nodes that ran the
   * jobs first, then any holder; each row is kept only if it hashes to the hash its origin signed.
   * Rows nobody serves stay missing (the next catch-up asks again); exports leave their samples out.
   */
  async function fetchTasks(signal: AbortSignal): Promise<void> {
    const missing = store.missingTaskRows();
    if (missing.length === 0) return;
    const want = new Map(missing.map((m) => [m.hash, new Set(m.origins)]));
    const origins = new Set(missing.flatMap((m) => m.origins));
    for (const peer of taskHolders(origins)) {
      if (want.size === 0 || signal.aborted || blocked()) break;
      // An origin holds the rows of its own jobs; any other node may hold any row.
      const ask = [...want]
        .filter(([h, by]) => (!origins.has(peer) || by.has(peer)) && !liedAbout.has(`${peer}\n${h}`))
        .map(([h]) => h);
      if (ask.length === 0) continue;
      let replies: TaskReply[];
      try {
        replies = await fetchTaskRows(host, peer, ask, { signal });
      } catch (err) {
        stats.fetchErrors++;
        log('fetching %d task rows from %s failed: %s', ask.length, peer, (err as Error).message);
        continue;
      }
      for (const hash of acceptTaskRows(peer, replies)) want.delete(hash);
    }
    if (want.size > 0) log('%d task rows not found on any node yet', want.size);
    reloadTasks();
    // Samples whose task just arrived can be audited now.
    if (auditor) for (const d of store.unaudited()) if (wantsAudit(d)) queueAudit(d);
  }

  let fetchingTasks: Promise<void> | null = null;
  let tasksAgain = false;
  /** Runs fetchTasks once at a time; a call while one runs runs it once more afterwards. */
  const tasksSoon = (signal: AbortSignal = stopSignal): Promise<void> => {
    if (fetchingTasks) {
      tasksAgain = true;
      return fetchingTasks;
    }
    fetchingTasks = (async () => {
      do {
        tasksAgain = false;
        try {
          await fetchTasks(signal);
        } catch (err) {
          if (storageFault(err) || signal.aborted) return;
          log.warn(`fetching task rows failed: ${(err as Error).message}`);
        }
      } while (tasksAgain && !signal.aborted);
    })().finally(() => {
      fetchingTasks = null;
    });
    return fetchingTasks;
  };

  // ---- catch-up ----
  /** `${peer}\n${origin}` → the summaryKey of the state last pulled from that peer. */
  const pulled = new Map<string, string>();

  /** Pulls one origin's digests after our high-water mark from one peer (the origin or any holder). */
  async function pull(peer: string, origin: string, signal: AbortSignal): Promise<number> {
    let after = store.highWater(origin);
    let added = 0;
    for (;;) {
      const page = await fetchDigests(host, peer, origin, after, MAX_LOG_DIGESTS_PER_FRAME, { signal });
      // Seqs the origin's own log lost count as held, so the high-water mark moves past them; only the
      // origin may say so (a relaying holder sends none, and would not be believed).
      if (page.lost && peer === origin) store.addLost(origin, page.lost);
      const { valid, forged } = checkRelayed(origin, page.digests);
      added += addDigests(valid, peer).length;
      if (forged.length > 0) {
        // Every digest carries its origin's signature: a bad one is the relayer's doing.
        store.noteConflict(peer);
        log.warn(
          `${peer} served ${forged.length} forged digests for ${origin} on /vtnode/log/2 (${forged[0]!.why}); ignored, and no more asked of it`,
        );
        break;
      }
      const last = Math.max(after, ...page.digests.map((d) => d.seq));
      if (page.digests.length < MAX_LOG_DIGESTS_PER_FRAME || last <= after) break;
      after = last;
    }
    return added;
  }

  /** Every peer's index of origins (peers that run no log server, or fail, are left out). */
  async function indices(signal: AbortSignal): Promise<Map<string, OriginSummary[]>> {
    const me = self();
    const out = new Map<string, OriginSummary[]>();
    await Promise.all(
      options
        .peers()
        .filter((p) => p !== me)
        .map(async (peer) => {
          try {
            const list = await fetchOrigins(host, peer, { signal });
            out.set(peer, list);
            for (const s of list) {
              const set = holders.get(s.origin) ?? new Set<string>();
              set.add(peer);
              holders.set(s.origin, set);
            }
          } catch (err) {
            log('asking %s for its origins failed: %s', peer, (err as Error).message);
          }
        }),
    );
    return out;
  }

  /** Pulls every origin from the peers that may hold digests we lack, origins in parallel. */
  async function pullAll(signal: AbortSignal): Promise<void> {
    const plan = [...planCatchUp(await indices(signal), (o) => store.highWater(o), pulled)];
    await pool(plan, concurrency, signal, async ([origin, sources]) => {
      for (const { peer, summary } of sources) {
        const key = `${peer}\n${origin}`;
        if (!worthPulling(store.highWater(origin), summary, pulled.get(key))) continue;
        try {
          const n = await pull(peer, origin, signal);
          pulled.set(key, summaryKey(summary));
          if (n > 0) log('caught up %d digests of %s from %s', n, origin, peer);
        } catch (err) {
          if (storageFault(err)) return;
          log('catch-up of %s from %s failed: %s', origin, peer, (err as Error).message);
        }
      }
    });
  }

  let catchingUp: Promise<void> | null = null;
  const catchUp = (signal?: AbortSignal): Promise<void> => {
    catchingUp ??= (async () => {
      const sig = withStop(signal);
      const why = blocked();
      if (why) {
        log('catch-up skipped: %s', why);
        return;
      }
      await pullAll(sig);
      await fetchPending(sig);
      await tasksSoon(sig);
    })().finally(() => {
      catchingUp = null;
    });
    return catchingUp;
  };

  const fetchPending = async (signal?: AbortSignal): Promise<void> => {
    if (blocked()) return;
    const pending = store.pending();
    if (pending.length > 0) await fetchAll(pending, withStop(signal));
    // Bodies fetched before a restart whose audit never ran.
    if (auditor) for (const d of store.unaudited()) if (wantsAudit(d)) queueAudit(d);
  };

  let timer: NodeJS.Timeout | null = null;

  return {
    onDigest(d) {
      if (stopSignal.aborted) return;
      queued.set(rowKey(d), d);
      scheduleFlush();
    },
    catchUp,
    fetchPending,
    async idle() {
      for (;;) {
        const waits = [
          bodies.size() > 0 ? bodies.drained() : null,
          auditing,
          catchingUp,
          fetchingTasks,
        ].filter(Boolean);
        if (flushTimer || queued.size > 0) {
          await sleep(fetchDelayMs + 5);
          continue;
        }
        if (waits.length === 0) return;
        await Promise.allSettled(waits);
        // Let the settled work clear its handle (and timers fire) before looking again.
        await new Promise((r) => setImmediate(r));
      }
    },
    trust() {
      return store.origins().map(trustOf);
    },
    stats() {
      const p = (q: number) => (lag.count > 0 ? lag.percentile(q) : null);
      return {
        ...store.counts(),
        ...stats,
        taskRowsMissing: store.missingTaskRows().length,
        lagP50Ms: p(50),
        lagP99Ms: p(99),
      };
    },
    start() {
      void catchUp();
      const every = options.catchUpIntervalMs ?? 30_000;
      if (every > 0) timer = setInterval(() => void catchUp(), every);
    },
    async stop() {
      if (timer) clearInterval(timer);
      if (flushTimer) clearTimeout(flushTimer);
      flushTimer = null;
      stopper.abort(new Error('collector stopped'));
      bodies.clear();
      await Promise.allSettled([bodies.drained(), auditing, catchingUp, fetchingTasks].filter(Boolean));
    },
  };
}
