import { join } from 'node:path';
import type { Digest } from '../../protocol/digest.ts';
import { MAX_LOG_DIGESTS_PER_FRAME } from '../../protocol/digest.ts';
import type { SampleReply } from '../../protocol/fetch.ts';
import { contentHash, type SampleBody } from '../../protocol/sample.ts';
import type { Task } from '../../protocol/task.ts';
import type { Scorer } from '../../sandbox/scorer.ts';
import { fetchBodies, fetchDigests } from '../digests/servers.ts';
import { logger } from '../logger.ts';
import type { StreamHost } from '../wire/streams.ts';
import { DATASET_DB, type DatasetStore } from './store.ts';
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

/** Why a body was not accepted for its digest; null when it matches. */
export function bodyMismatch(digest: Digest, reply: SampleReply): string | null {
  const b = reply.body;
  if (reply.origin !== digest.origin) return `origin is ${reply.origin}, the digest's is ${digest.origin}`;
  if (reply.seq !== digest.seq) return `seq is ${reply.seq}, the digest's is ${digest.seq}`;
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
  /** Host the collector fetches over (/vtnode/sample/1, /vtnode/log/1). */
  host: StreamHost;
  /** Peer ids of the fleet members to catch up from (and to ask for bodies an origin cannot serve). */
  peers: () => string[];
  /** The dataset dir. */
  store: DatasetStore;
  /** Reward at or above which a sample counts as verified (default 1.0). */
  minReward?: number;
  /** Fraction of verified samples re-scored (default 0.05). */
  auditFraction?: number;
  /** Re-scores samples; none = no audits. */
  auditor?: Auditor | null;
  /** How often to catch up with every peer, ms (default 30 s; 0 = only when asked). */
  catchUpIntervalMs?: number;
  /** Delay before a batch of gossiped digests is fetched, ms (default 50). */
  fetchDelayMs?: number;
  /** Bodies fetched at once (parallel streams, default 4). */
  fetchConcurrency?: number;
  /** Other holders tried when the origin cannot serve a body (default 3). */
  maxOtherHolders?: number;
  /** Stops the collector. */
  signal?: AbortSignal;
  /**
   * The dataset's storage health (a full disk): while blocked, nothing is fetched or stored
   * (gossiped digests are dropped; catch-up fetches them from the workers' logs once it resumes).
   */
  storage?: StorageHealth;
}

/** Whether the dataset can take writes (node/storage/disk-guard.ts behind it). */
export interface StorageHealth {
  /** Why nothing can be stored now, or null when it can. */
  blocked(): string | null;
  /** Reports a failed write of `path`: true when it was a storage fault (the health then says so). */
  failed(err: unknown, path: string): boolean;
}

export interface CollectorStats {
  digests: number;
  bodies: number;
  pending: number;
  rejected: number;
  audits: number;
  auditFailures: number;
  fetchErrors: number;
}

export interface Collector {
  /** Feeds a digest (from gossip, already validated: origin = signer). */
  onDigest(digest: Digest): void;
  /** Asks every peer for its digests after our high-water mark, then fetches missing bodies. */
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

/**
 * The collector: stores every digest it learns of (gossip or catch-up), fetches and verifies the
 * bodies, spot-audits verified samples and keeps trust per origin. All state lives in the dataset
 * store, so a restarted collector resumes from its high-water marks.
 */
export function createCollector(options: CollectorOptions): Collector {
  const log = logger('vtnode:collector');
  const { host, store } = options;
  const minReward = options.minReward ?? 1;
  const auditFraction = options.auditFraction ?? 0.05;
  const auditor = options.auditor ?? null;
  const fetchDelayMs = options.fetchDelayMs ?? 50;
  const concurrency = Math.max(1, options.fetchConcurrency ?? 4);
  const maxOthers = options.maxOtherHolders ?? 3;
  const stopper = new AbortController();
  const stopSignal = options.signal ? AbortSignal.any([options.signal, stopper.signal]) : stopper.signal;
  const stats = { audits: 0, auditFailures: 0, fetchErrors: 0 };
  const blocked = () => options.storage?.blocked() ?? null;
  /** True when `err` was a storage fault (the write did not happen; the health now says why). */
  const storageFault = (err: unknown) => options.storage?.failed(err, join(store.dir, DATASET_DB)) ?? false;
  let tasks = store.tasks();
  let tasksLoadedAt = Date.now();

  const taskOf = (id: string): Task | undefined => {
    let t = tasks.get(id);
    if (!t && Date.now() - tasksLoadedAt > 5000) {
      // Tasks may be added to the dataset while it runs (`vtnode collect --tasks` on restart).
      tasks = store.tasks();
      tasksLoadedAt = Date.now();
      t = tasks.get(id);
    }
    return t;
  };

  const suspect = (origin: string): boolean => {
    const r = store.origin(origin);
    return r ? trustOf({ ...r, samples: 0 }).suspect : false;
  };

  // ---- audits: one at a time (a sandbox run is CPU-heavy) ----
  const auditQueue: Digest[] = [];
  const auditQueued = new Set<string>();
  let auditing: Promise<void> | null = null;

  const wantsAudit = (d: Digest): boolean =>
    auditor !== null &&
    d.reward >= minReward &&
    (selectedForAudit(d.sampleId, auditFraction) || suspect(d.origin));

  const queueAudit = (d: Digest) => {
    const key = `${d.origin}#${d.seq}`;
    if (auditQueued.has(key)) return;
    auditQueued.add(key);
    auditQueue.push(d);
    auditing ??= runAudits().finally(() => {
      auditing = null;
    });
  };

  async function runAudits(): Promise<void> {
    while (auditQueue.length > 0 && !stopSignal.aborted && !blocked()) {
      const d = auditQueue.shift()!;
      auditQueued.delete(`${d.origin}#${d.seq}`);
      const s = store.sample(d.origin, d.seq);
      if (!s?.body || s.audit !== 'none') continue;
      const task = taskOf(d.taskId);
      if (!task) continue;
      let result: { reward: number } | null;
      try {
        result = await auditor!.audit(task, s.body, stopSignal);
      } catch (err) {
        if (!stopSignal.aborted) log.warn(`audit of ${d.sampleId} failed to run: ${(err as Error).message}`);
        continue;
      }
      if (!result) continue;
      const passed = Math.abs(result.reward - d.reward) <= 1e-9;
      try {
        store.recordAudit(d, passed, result.reward);
      } catch (err) {
        // Not recorded: the sample stays unaudited and is queued again once the disk has space.
        if (storageFault(err)) continue;
        throw err;
      }
      stats.audits++;
      if (!passed) {
        stats.auditFailures++;
        const n = store.quarantineOrigin(d.origin);
        log.warn(
          `audit: ${d.origin} claimed reward ${d.reward} for ${d.sampleId} (task ${d.taskId}), the re-score gave ${result.reward}; ${n} of its samples quarantined until re-verified`,
        );
        // A suspect origin gets every verified sample audited.
        for (const other of store.unaudited(minReward)) if (other.origin === d.origin) queueAudit(other);
      }
    }
  }

  // ---- bodies ----
  const queued = new Map<string, Digest>();
  let flushTimer: NodeJS.Timeout | null = null;
  let flushing: Promise<void> | null = null;

  const scheduleFlush = () => {
    if (flushTimer || stopSignal.aborted) return;
    flushTimer = setTimeout(() => {
      flushTimer = null;
      // Gossiped digests are stored in one transaction per batch (a durable commit each would cost a flush each).
      const incoming = [...queued.values()];
      queued.clear();
      // Dropped while the disk is full: catch-up gets them from the workers' logs once it has space.
      if (blocked()) return;
      let results: ReturnType<DatasetStore['addDigests']>;
      try {
        results = store.addDigests(incoming);
      } catch (err) {
        if (storageFault(err)) return;
        throw err;
      }
      const batch = incoming.filter((d, i) => {
        if (results[i] === 'conflict') log.warn(`${d.origin} sent two different digests for seq ${d.seq}`);
        return results[i] === 'new';
      });
      if (batch.length === 0) return;
      const run: Promise<void> = (flushing ?? Promise.resolve())
        .then(() => fetchAll(batch, stopSignal))
        .finally(() => {
          if (flushing === run) flushing = null;
        });
      flushing = run;
    }, fetchDelayMs);
  };

  /** Checks a body against its digest: null when it matches, else why (and the rejection is recorded). */
  const check = (d: Digest, reply: SampleReply, from: string): string | null => {
    const why = bodyMismatch(d, reply);
    if (why) {
      log.warn(`rejected the body of ${d.sampleId} from ${from}: ${why}`);
      if (from === d.origin) store.rejectBody(d);
      else store.noteConflict(from);
    }
    return why;
  };

  /** Fetches the bodies of digests: from their origin first, then from other holders. */
  async function fetchAll(digests: Digest[], signal: AbortSignal): Promise<void> {
    const byOrigin = new Map<string, Digest[]>();
    for (const d of digests) {
      const list = byOrigin.get(d.origin) ?? [];
      list.push(d);
      byOrigin.set(d.origin, list);
    }
    const jobs: (() => Promise<void>)[] = [];
    for (const [origin, list] of byOrigin)
      for (let i = 0; i < list.length; i += 64) {
        const batch = list.slice(i, i + 64);
        jobs.push(() => fetchBatch(origin, batch, signal));
      }
    let next = 0;
    const worker = async () => {
      while (next < jobs.length && !signal.aborted)
        await jobs[next++]!().catch((err: unknown) => {
          // Not stored: the bodies stay pending and are fetched again once the disk has space.
          if (!storageFault(err)) throw err;
        });
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker));
  }

  async function fetchBatch(origin: string, batch: Digest[], signal: AbortSignal): Promise<void> {
    let missing = batch.filter((d) => store.sample(d.origin, d.seq)?.bodyState === 'pending');
    const holders = [
      origin,
      ...options
        .peers()
        .filter((p) => p !== origin && p !== selfId())
        .slice(0, maxOthers),
    ];
    for (const holder of holders) {
      if (missing.length === 0 || signal.aborted || blocked()) return;
      let replies: SampleReply[];
      try {
        replies = await fetchBodies(
          host,
          holder,
          missing.map((d) => d.sampleId),
          { signal },
        );
      } catch (err) {
        stats.fetchErrors++;
        log('fetching %d bodies from %s failed: %s', missing.length, holder, (err as Error).message);
        continue;
      }
      const byId = new Map(missing.map((d) => [d.sampleId, d]));
      const got = new Set<string>();
      const accepted: { digest: Digest; body: SampleBody }[] = [];
      for (const reply of replies) {
        const d = byId.get(reply.body.sampleId);
        if (!d) continue;
        // The origin lost that seq and logged the sample again under a new one: not this digest's body.
        if (holder === origin && reply.seq !== d.seq && store.isLost(origin, d.seq)) continue;
        if (check(d, reply, holder) === null) {
          accepted.push({ digest: d, body: reply.body });
          got.add(d.sampleId);
        } else if (holder === origin) got.add(d.sampleId); // rejected by its origin: not asked again
      }
      // One transaction per reply: a durable commit per body would cost a disk flush each.
      store.putBodies(accepted);
      for (const { digest } of accepted) if (wantsAudit(digest) && taskOf(digest.taskId)) queueAudit(digest);
      missing = missing.filter((d) => !got.has(d.sampleId));
    }
  }

  const selfId = (): string => {
    const h = host as unknown as { peerId?: { toString(): string } };
    return h.peerId?.toString() ?? '';
  };

  // ---- catch-up ----
  async function catchUpWith(peer: string, signal: AbortSignal): Promise<number> {
    let after = store.highWater(peer);
    let added = 0;
    for (;;) {
      const page = await fetchDigests(host, peer, after, MAX_LOG_DIGESTS_PER_FRAME, { signal });
      const own = page.digests.filter((d) => d.origin === peer);
      if (own.length < page.digests.length) {
        // A node's log serves only its own digests; anything else is forged.
        store.noteConflict(peer);
        log.warn(
          `${peer} served ${page.digests.length - own.length} digests of other origins on /vtnode/log/1; ignored`,
        );
      }
      // Seqs the peer's log lost count as held, so the high-water mark moves past them.
      if (page.lost) store.addLost(peer, page.lost);
      for (const [i, r] of store.addDigests(own).entries()) {
        if (r === 'new') added++;
        else if (r === 'conflict') log.warn(`${peer} sent two different digests for seq ${own[i]!.seq}`);
      }
      const last = page.digests.at(-1)?.seq ?? after;
      if (page.digests.length === 0 || last <= after || last >= page.highWater) break;
      after = last;
    }
    return added;
  }

  let catchingUp: Promise<void> | null = null;
  const catchUp = (signal?: AbortSignal): Promise<void> => {
    catchingUp ??= (async () => {
      const sig = signal ? AbortSignal.any([signal, stopSignal]) : stopSignal;
      const why = blocked();
      if (why) {
        log('catch-up skipped: %s', why);
        return;
      }
      const peers = options.peers().filter((p) => p !== selfId());
      await Promise.all(
        peers.map(async (peer) => {
          try {
            const n = await catchUpWith(peer, sig);
            if (n > 0) log('caught up %d digests from %s', n, peer);
          } catch (err) {
            if (storageFault(err)) return;
            // Not every peer runs a worker log (a submitter, another collector): that is fine.
            log('catch-up with %s failed: %s', peer, (err as Error).message);
          }
        }),
      );
      await fetchPending(sig);
    })().finally(() => {
      catchingUp = null;
    });
    return catchingUp;
  };

  const fetchPending = async (signal?: AbortSignal): Promise<void> => {
    const sig = signal ? AbortSignal.any([signal, stopSignal]) : stopSignal;
    if (blocked()) return;
    const pending = store.pending();
    if (pending.length > 0) await fetchAll(pending, sig);
    // Bodies fetched before a restart whose audit never ran.
    if (auditor)
      for (const d of store.unaudited(minReward)) if (wantsAudit(d) && taskOf(d.taskId)) queueAudit(d);
  };

  let timer: NodeJS.Timeout | null = null;

  return {
    onDigest(d) {
      if (stopSignal.aborted) return;
      queued.set(`${d.origin}#${d.seq}`, d);
      scheduleFlush();
    },
    catchUp,
    fetchPending,
    async idle() {
      for (;;) {
        const waits = [flushing, auditing, catchingUp].filter(Boolean);
        if (flushTimer || queued.size > 0) {
          await new Promise((r) => setTimeout(r, fetchDelayMs + 5));
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
      return { ...store.counts(), ...stats };
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
      await Promise.allSettled([flushing, auditing, catchingUp].filter(Boolean));
    },
  };
}
