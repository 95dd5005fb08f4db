import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson, sha256Hex } from '../../protocol/canonical.ts';
import type { Digest, SignedDigest } from '../../protocol/digest.ts';
import type { LostRange, OriginSummary, SampleKey, SampleReply } from '../../protocol/fetch.ts';
import { parseJsonWith } from '../../protocol/parse.ts';
import { contentHash, SampleBody } from '../../protocol/sample.ts';
import { Task, taskHash } from '../../protocol/task.ts';
import type { TaskReply } from '../../protocol/task-fetch.ts';
import { DIGEST_ROW_COLUMNS, type DigestRow, digestOfRow, digestValues, rowClaims } from '../digests/row.ts';
import { type DatabaseSync, openDatabase, storageError, transaction } from '../sqlite.ts';
import { storageErrorOf } from '../storage/errors.ts';

/** File name of the dataset index inside a dataset dir. */
export const DATASET_DB = 'dataset.db';
/** Folder of content-addressed candidate texts inside a dataset dir (`bodies/<hex sha256>`). */
export const BODIES_DIR = 'bodies';

/** Whitespace-normalised hash of a candidate: runs of whitespace become one space, ends trimmed. */
export function normalisedHash(candidate: string): string {
  return `sha256:${sha256Hex(candidate.replace(/\s+/g, ' ').trim())}`;
}

/** Whether a body was fetched and matched its digest. */
export type BodyState = 'pending' | 'ok' | 'rejected';
/** Outcome of a collector's re-score of a sample. */
export type AuditState = 'none' | 'passed' | 'failed';

/** One scored sample in the dataset: its signed digest and what the collector knows about it. */
export interface StoredSample {
  /** As its origin signed it (`sig` is '' only for rows of a dataset from before digests were signed). */
  digest: SignedDigest;
  bodyState: BodyState;
  /** The body (candidate included) once fetched and verified. */
  body: SampleBody | null;
  audit: AuditState;
  /** Reward the collector's own re-score gave, when audited. */
  auditReward: number | null;
  /** Excluded from exports until re-verified (its origin failed an audit). */
  quarantined: boolean;
  /** Latest `vtnode rescore` result, if any. */
  rescore: { workspaceId: string; reward: number; reasons: string[] } | null;
}

/** What the collector has learnt about one origin. */
export interface OriginRecord {
  origin: string;
  /** Highest seq held contiguously from 1. */
  highWater: number;
  samples: number;
  auditsPassed: number;
  auditFailures: number;
  /** Bodies the origin served that did not match its own digest. */
  rejectedBodies: number;
  /**
   * Provable misbehaviour other than bodies and audits: two different signed digests for one seq (or
   * one sample id under two seqs) from this origin, or, for a node that served others' data, digests
   * it relayed with a bad signature and bodies it served under a row's (origin, seq) that do not
   * match that row's digest.
   */
  conflicts: number;
}

/** A claim of one sample id, without its body (see DatasetStore.claimsOf). */
export interface Claim {
  digest: SignedDigest;
  bodyState: BodyState;
  audit: AuditState;
}

/** Result of adding a digest. */
export type AddResult = 'new' | 'known' | 'conflict';

/** The dataset dir: a node:sqlite index plus content-addressed candidate texts. */
export interface DatasetStore {
  readonly dir: string;
  /**
   * Adds a signed digest (callers verify the signature first; idempotent); `conflict` when the origin
   * already signed another digest for that seq, or the same sample id under another seq.
   */
  addDigest(digest: SignedDigest): AddResult;
  /** Adds digests in one transaction (a catch-up page); results in order. */
  addDigests(digests: readonly SignedDigest[]): AddResult[];
  /** Highest contiguous seq held from an origin, counting seqs it declared lost (0 = none). */
  highWater(origin: string): number;
  /**
   * Records seq ranges an origin's own log says it lost (/vtnode/log/1 `lost`): they count as held
   * for the high-water mark, and that origin logging a sample again under a new seq is no conflict.
   */
  addLost(origin: string, ranges: readonly LostRange[]): void;
  /** Whether an origin declared `seq` lost. */
  isLost(origin: string, seq: number): boolean;
  /** Samples whose bodies are still wanted, ordered by origin then seq. */
  pending(limit?: number): SignedDigest[];
  /** The stored digest of (origin, sample id). */
  digest(origin: string, sampleId: string): SignedDigest | undefined;
  /** Every origin's claim of one sample id (ordered by origin), bodies not read. */
  claimsOf(sampleId: string): Claim[];
  /** Stores a verified body for its digest (callers check it against the digest first). */
  putBody(digest: Digest, body: SampleBody): void;
  /** Stores verified bodies in one transaction. */
  putBodies(items: readonly { digest: Digest; body: SampleBody }[]): void;
  /** Marks a digest's body as rejected (the origin served a body that contradicts its digest). */
  rejectBody(digest: Digest): void;
  /** Samples of the dataset, ordered by origin then seq. */
  samples(filter?: { origin?: string; bodyState?: BodyState }): StoredSample[];
  /** One sample. */
  sample(origin: string, seq: number): StoredSample | undefined;
  /** Records a collector re-score. */
  recordAudit(digest: Digest, passed: boolean, reward: number): void;
  /** Quarantines (or releases) every sample of an origin that has not passed an audit. */
  quarantineOrigin(origin: string): number;
  /** Records a `vtnode rescore` result. */
  recordRescore(digest: Digest, result: { workspaceId: string; reward: number; reasons: string[] }): void;
  /** Counts a conflict against an origin. */
  noteConflict(origin: string): void;
  origins(): OriginRecord[];
  /** One origin's record (without reading its samples), or undefined. */
  origin(origin: string): Omit<OriginRecord, 'samples'> | undefined;
  /** Digests with a verified body and no audit yet, whatever their reward (no body is read). */
  unaudited(): SignedDigest[];
  /**
   * Adds or replaces tasks (by id), and keeps each row by its hash with `source` as where it came
   * from (default `file`): a v2 digest's sample uses only the row its signed task hash names.
   */
  putTasks(tasks: readonly Task[], source?: string): number;
  /** Tasks by id (the rows of v1 digests, which name no hash, are looked up so). */
  tasks(): Map<string, Task>;
  /**
   * Keeps a task row under its hash with where it came from (a peer id, `file`); callers check the
   * row hashes to `hash` first. A row already held keeps its first source.
   */
  putTaskRow(hash: string, task: Task, source: string): void;
  /** Task rows held by hash, with where each came from. */
  taskRows(): Map<string, { task: Task; source: string }>;
  /** Task rows held among `hashes`, in the order asked, for /vtnode/task/1 (a collector relays verified rows). */
  getTaskRows(hashes: readonly string[]): TaskReply[];
  /** Task hashes the dataset's digests name but whose rows it does not hold, with the origins that signed each. */
  missingTaskRows(): { hash: string; origins: string[] }[];
  /** A dataset setting (min reward, ...). */
  getMeta(key: string): string | undefined;
  setMeta(key: string, value: string): void;
  /** Verified bodies held of exact (origin, seq) rows, for /vtnode/sample/2 (a collector serves what it holds). */
  getRows(keys: readonly SampleKey[]): SampleReply[];
  /** Origins held, ascending by peer id, after `after`, for /vtnode/log/2 (signed digests only). */
  originSummaries(after: string | undefined, limit: number): OriginSummary[];
  /** One origin's signed digests after a seq, for /vtnode/log/2 (relayed as the origin signed them). */
  digestsOf(origin: string, after: number, limit: number): { digests: SignedDigest[]; highWater: number };
  /**
   * Deterministic digest of the dataset's contents (every digest, which bodies are held, audits
   * and quarantine): two collectors that hold the same samples report the same value.
   */
  contentDigest(): string;
  /** Rows (one per origin and seq), distinct sample ids among them, rows per body state, rows audited. */
  counts(): {
    digests: number;
    samples: number;
    bodies: number;
    pending: number;
    rejected: number;
    audited: number;
    origins: number;
  };
  close(): void;
}

/** The columns a signed digest is read from (never the body's). */
const DIGEST_COLUMNS = `origin, ${DIGEST_ROW_COLUMNS}`;
const EMPTY_HASH = sha256Hex('');

/** A dataset from before bodies' hashes were kept: adds the column and hashes the bodies held, once. */
function addMetaHashes(db: DatabaseSync): void {
  db.exec('ALTER TABLE samples ADD COLUMN meta_hash TEXT');
  const rows = db.prepare("SELECT origin, seq, body_meta FROM samples WHERE body_state = 'ok'").all() as {
    origin: string;
    seq: number;
    body_meta: string | null;
  }[];
  const set = db.prepare('UPDATE samples SET meta_hash = ? WHERE origin = ? AND seq = ?');
  transaction(db, () => {
    for (const r of rows) set.run(sha256Hex(r.body_meta ?? ''), r.origin, r.seq);
  });
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, json TEXT NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS task_rows (hash TEXT PRIMARY KEY, json TEXT NOT NULL, source TEXT NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS samples (
  origin TEXT NOT NULL,
  seq INTEGER NOT NULL,
  sample_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  model TEXT NOT NULL,
  split TEXT NOT NULL,
  reward REAL NOT NULL,
  content_hash TEXT NOT NULL,
  eval_fingerprint TEXT NOT NULL,
  sig TEXT NOT NULL DEFAULT '',
  body_state TEXT NOT NULL DEFAULT 'pending',
  body_meta TEXT,
  meta_hash TEXT,
  norm_hash TEXT,
  audit TEXT NOT NULL DEFAULT 'none',
  audit_reward REAL,
  quarantined INTEGER NOT NULL DEFAULT 0,
  rescore TEXT,
  task_hash TEXT,
  PRIMARY KEY (origin, seq)
) STRICT;
CREATE INDEX IF NOT EXISTS samples_by_id ON samples (sample_id);
CREATE INDEX IF NOT EXISTS samples_by_state ON samples (body_state);
CREATE TABLE IF NOT EXISTS lost (
  origin TEXT NOT NULL,
  first INTEGER NOT NULL,
  last INTEGER NOT NULL,
  PRIMARY KEY (origin, first, last)
) STRICT;
CREATE TABLE IF NOT EXISTS origins (
  origin TEXT PRIMARY KEY,
  high_water INTEGER NOT NULL DEFAULT 0,
  audits_passed INTEGER NOT NULL DEFAULT 0,
  audit_failures INTEGER NOT NULL DEFAULT 0,
  rejected_bodies INTEGER NOT NULL DEFAULT 0,
  conflicts INTEGER NOT NULL DEFAULT 0
) STRICT;
`;

/** A row of the dataset index: the signed digest's columns, its origin, and what the collector learnt. */
interface Row extends DigestRow {
  origin: string;
  body_state: string;
  body_meta: string | null;
  meta_hash: string | null;
  norm_hash: string | null;
  audit: string;
  audit_reward: number | null;
  quarantined: number;
  rescore: string | null;
}

const hexOf = (hash: string) => hash.slice('sha256:'.length);

/** What to do with a corrupt dataset index (named in the error that refuses it). */
export const DATASET_IF_CORRUPT =
  'Move the dataset dir aside and run `vtnode collect` with a fresh --out: catch-up fetches every digest and body again from the fleet (audits and rescores are redone).';

/** Opens (creating if needed) a dataset dir; a corrupt index is refused with a StorageError naming it. */
export function openDatasetStore(dir: string): DatasetStore {
  try {
    // The dataset is private code: its folders are the owner's only, whatever the umask.
    mkdirSync(join(dir, BODIES_DIR), { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    chmodSync(join(dir, BODIES_DIR), 0o700);
  } catch (err) {
    throw storageErrorOf(join(dir, BODIES_DIR), "the dataset's body folder", err);
  }
  const dbPath = join(dir, DATASET_DB);
  const role = { what: "the collector's dataset index", ifCorrupt: DATASET_IF_CORRUPT };
  const db = openDatabase(dbPath, role);
  try {
    db.exec(SCHEMA);
    // A dataset from before digests were signed: its rows keep sig '' and are never relayed.
    const columns = db.prepare('PRAGMA table_info(samples)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'sig'))
      db.exec("ALTER TABLE samples ADD COLUMN sig TEXT NOT NULL DEFAULT ''");
    if (!columns.some((c) => c.name === 'meta_hash')) addMetaHashes(db);
    // A dataset from before digests committed to their task row (v1 digests only).
    if (!columns.some((c) => c.name === 'task_hash'))
      db.exec('ALTER TABLE samples ADD COLUMN task_hash TEXT');
  } catch (err) {
    db.close();
    throw storageError(dbPath, role, err);
  }

  const q = {
    get: db.prepare('SELECT * FROM samples WHERE origin = ? AND seq = ?'),
    // The latest seq first: after an origin lost rows and logged a sample again, that is the one it serves.
    byOriginId: db.prepare(
      'SELECT * FROM samples WHERE origin = ? AND sample_id = ? ORDER BY seq DESC LIMIT 1',
    ),
    claims: db.prepare(
      `SELECT ${DIGEST_COLUMNS}, body_state, audit FROM samples WHERE sample_id = ? ORDER BY origin, seq`,
    ),
    insert: db.prepare(`INSERT INTO samples (${DIGEST_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    summaries: db.prepare(
      `SELECT s.origin AS origin, o.high_water AS highWater, MAX(s.seq) AS maxSeq, COUNT(*) AS count
       FROM samples s JOIN origins o ON o.origin = s.origin
       WHERE s.sig != '' AND s.origin > ? GROUP BY s.origin ORDER BY s.origin LIMIT ?`,
    ),
    digestsOf: db.prepare(
      `SELECT ${DIGEST_COLUMNS} FROM samples WHERE origin = ? AND seq > ? AND sig != '' ORDER BY seq LIMIT ?`,
    ),
    ensureOrigin: db.prepare('INSERT OR IGNORE INTO origins (origin) VALUES (?)'),
    highWater: db.prepare('SELECT high_water FROM origins WHERE origin = ?'),
    has: db.prepare('SELECT 1 AS x FROM samples WHERE origin = ? AND seq = ?'),
    setHighWater: db.prepare('UPDATE origins SET high_water = ? WHERE origin = ?'),
    addLost: db.prepare('INSERT OR IGNORE INTO lost (origin, first, last) VALUES (?, ?, ?)'),
    lostAt: db.prepare('SELECT MAX(last) AS last FROM lost WHERE origin = ? AND first <= ? AND last >= ?'),
    pending: db.prepare("SELECT * FROM samples WHERE body_state = 'pending' ORDER BY origin, seq LIMIT ?"),
    putBody: db.prepare(
      "UPDATE samples SET body_state = 'ok', body_meta = ?, meta_hash = ?, norm_hash = ? WHERE origin = ? AND seq = ?",
    ),
    reject: db.prepare("UPDATE samples SET body_state = 'rejected' WHERE origin = ? AND seq = ?"),
    countReject: db.prepare('UPDATE origins SET rejected_bodies = rejected_bodies + 1 WHERE origin = ?'),
    audit: db.prepare(
      'UPDATE samples SET audit = ?, audit_reward = ?, quarantined = CASE WHEN ? THEN 0 ELSE 1 END WHERE origin = ? AND seq = ?',
    ),
    auditPassed: db.prepare('UPDATE origins SET audits_passed = audits_passed + 1 WHERE origin = ?'),
    auditFailed: db.prepare('UPDATE origins SET audit_failures = audit_failures + 1 WHERE origin = ?'),
    quarantine: db.prepare(
      "UPDATE samples SET quarantined = 1 WHERE origin = ? AND audit != 'passed' AND quarantined = 0",
    ),
    rescore: db.prepare('UPDATE samples SET rescore = ? WHERE origin = ? AND seq = ?'),
    conflict: db.prepare('UPDATE origins SET conflicts = conflicts + 1 WHERE origin = ?'),
    origins: db.prepare(
      'SELECT o.*, (SELECT COUNT(*) FROM samples s WHERE s.origin = o.origin) AS samples FROM origins o ORDER BY o.origin',
    ),
    origin: db.prepare('SELECT * FROM origins WHERE origin = ?'),
    unaudited: db.prepare(
      `SELECT ${DIGEST_COLUMNS} FROM samples WHERE body_state = 'ok' AND audit = 'none' ORDER BY origin, seq`,
    ),
    contentRows: db.prepare(
      'SELECT origin, seq, sample_id, content_hash, reward, body_state, meta_hash, audit, quarantined FROM samples ORDER BY origin, seq',
    ),
    putTask: db.prepare('INSERT OR REPLACE INTO tasks (id, json) VALUES (?, ?)'),
    tasks: db.prepare('SELECT json FROM tasks ORDER BY id'),
    putTaskRow: db.prepare('INSERT OR IGNORE INTO task_rows (hash, json, source) VALUES (?, ?, ?)'),
    taskRow: db.prepare('SELECT json FROM task_rows WHERE hash = ?'),
    taskRows: db.prepare('SELECT hash, json, source FROM task_rows ORDER BY hash'),
    missingTaskRows: db.prepare(
      `SELECT s.task_hash AS hash, group_concat(DISTINCT s.origin) AS origins FROM samples s
       WHERE s.task_hash IS NOT NULL AND NOT EXISTS (SELECT 1 FROM task_rows t WHERE t.hash = s.task_hash)
       GROUP BY s.task_hash ORDER BY s.task_hash`,
    ),
    getMeta: db.prepare('SELECT value FROM meta WHERE key = ?'),
    setMeta: db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
    all: db.prepare('SELECT * FROM samples ORDER BY origin, seq'),
    allOfOrigin: db.prepare('SELECT * FROM samples WHERE origin = ? ORDER BY seq'),
    allOfState: db.prepare('SELECT * FROM samples WHERE body_state = ? ORDER BY origin, seq'),
    counts: db.prepare(
      `SELECT COUNT(*) AS digests, COUNT(DISTINCT sample_id) AS samples, COALESCE(SUM(body_state = 'ok'), 0) AS bodies,
              COALESCE(SUM(body_state = 'pending'), 0) AS pending, COALESCE(SUM(body_state = 'rejected'), 0) AS rejected,
              COALESCE(SUM(audit != 'none'), 0) AS audited,
              (SELECT COUNT(*) FROM origins) AS origins FROM samples`,
    ),
  };

  const toDigest = (r: DigestRow & { origin: string }): SignedDigest => digestOfRow(r, r.origin);

  const readCandidate = (hash: string): string => readFileSync(join(dir, BODIES_DIR, hexOf(hash)), 'utf8');

  const toSample = (r: Row): StoredSample => {
    let body: SampleBody | null = null;
    if (r.body_state === 'ok' && r.body_meta) {
      const meta = JSON.parse(r.body_meta) as Omit<SampleBody, 'candidate'>;
      body = parseJsonWith(
        SampleBody,
        JSON.stringify({ ...meta, candidate: readCandidate(r.content_hash) }),
        `${dir}: sample ${r.origin}#${r.seq}`,
      );
    }
    return {
      digest: toDigest(r),
      bodyState: r.body_state as BodyState,
      body,
      audit: r.audit as AuditState,
      auditReward: r.audit_reward,
      quarantined: r.quarantined === 1,
      rescore: r.rescore ? (JSON.parse(r.rescore) as StoredSample['rescore']) : null,
    };
  };

  /** End of the lost range of `origin` holding `seq`, or null. */
  const lostEnd = (origin: string, seq: number): number | null =>
    (q.lostAt.get(origin, seq, seq) as { last: number | null } | undefined)?.last ?? null;

  const advance = (origin: string) => {
    let hw = (q.highWater.get(origin) as { high_water: number } | undefined)?.high_water ?? 0;
    const start = hw;
    for (;;) {
      if (q.has.get(origin, hw + 1)) hw++;
      else {
        // A range the origin lost is held as far as catch-up goes: nobody can serve it.
        const end = lostEnd(origin, hw + 1);
        if (end === null) break;
        hw = end;
      }
    }
    if (hw !== start) q.setHighWater.run(hw, origin);
  };

  const add = (d: SignedDigest): AddResult => {
    q.ensureOrigin.run(d.origin);
    const existing = q.get.get(d.origin, d.seq) as Row | undefined;
    if (existing) {
      if (rowClaims(existing, d)) return 'known';
      q.conflict.run(d.origin);
      return 'conflict';
    }
    const sameId = q.byOriginId.get(d.origin, d.sampleId) as Row | undefined;
    // Logged again after the origin lost the row: a new seq for the same sample, not a contradiction.
    if (sameId && lostEnd(d.origin, sameId.seq) === null) {
      // One sample under two seqs: the origin's log is unique per sample id, so it contradicted itself.
      q.conflict.run(d.origin);
      return 'conflict';
    }
    q.insert.run(d.origin, ...digestValues(d));
    advance(d.origin);
    return 'new';
  };

  const writeBody = (d: Digest, body: SampleBody) => {
    const path = join(dir, BODIES_DIR, hexOf(body.contentHash));
    if (!existsSync(path)) {
      const tmp = `${path}.${process.pid}.tmp`;
      try {
        writeFileSync(tmp, body.candidate, { mode: 0o600 });
        renameSync(tmp, path);
      } catch (err) {
        rmSync(tmp, { force: true });
        throw storageErrorOf(path, 'a dataset body', err);
      }
    }
    const { candidate, ...meta } = body;
    const json = canonicalJson(meta);
    q.putBody.run(json, sha256Hex(json), normalisedHash(candidate), d.origin, d.seq);
  };

  return {
    dir,
    addDigest(d) {
      return transaction(db, () => add(d));
    },
    addDigests(list) {
      if (list.length === 0) return [];
      return transaction(db, () => list.map(add));
    },
    highWater(origin) {
      return (q.highWater.get(origin) as { high_water: number } | undefined)?.high_water ?? 0;
    },
    addLost(origin, ranges) {
      if (ranges.length === 0) return;
      transaction(db, () => {
        q.ensureOrigin.run(origin);
        for (const r of ranges) q.addLost.run(origin, r.first, r.last);
        advance(origin);
      });
    },
    isLost(origin, seq) {
      return lostEnd(origin, seq) !== null;
    },
    pending(limit = 1_000_000) {
      return (q.pending.all(limit) as unknown as Row[]).map(toDigest);
    },
    digest(origin, sampleId) {
      const r = q.byOriginId.get(origin, sampleId) as Row | undefined;
      return r ? toDigest(r) : undefined;
    },
    claimsOf(sampleId) {
      return (q.claims.all(sampleId) as unknown as Row[]).map((r) => ({
        digest: toDigest(r),
        bodyState: r.body_state as BodyState,
        audit: r.audit as AuditState,
      }));
    },
    putBody(d, body) {
      writeBody(d, body);
    },
    putBodies(items) {
      if (items.length === 0) return;
      transaction(db, () => {
        for (const { digest, body } of items) writeBody(digest, body);
      });
    },
    rejectBody(d) {
      transaction(db, () => {
        q.reject.run(d.origin, d.seq);
        q.countReject.run(d.origin);
      });
    },
    samples(filter = {}) {
      const rows = filter.origin
        ? (q.allOfOrigin.all(filter.origin) as unknown as Row[])
        : filter.bodyState
          ? (q.allOfState.all(filter.bodyState) as unknown as Row[])
          : (q.all.all() as unknown as Row[]);
      return rows.filter((r) => !filter.bodyState || r.body_state === filter.bodyState).map(toSample);
    },
    sample(origin, seq) {
      const r = q.get.get(origin, seq) as Row | undefined;
      return r ? toSample(r) : undefined;
    },
    recordAudit(d, passed, reward) {
      transaction(db, () => {
        q.audit.run(passed ? 'passed' : 'failed', reward, passed ? 1 : 0, d.origin, d.seq);
        (passed ? q.auditPassed : q.auditFailed).run(d.origin);
      });
    },
    quarantineOrigin(origin) {
      return Number(q.quarantine.run(origin).changes);
    },
    recordRescore(d, result) {
      q.rescore.run(canonicalJson(result), d.origin, d.seq);
    },
    noteConflict(origin) {
      q.ensureOrigin.run(origin);
      q.conflict.run(origin);
    },
    origins() {
      return (q.origins.all() as unknown as Record<string, number | string>[]).map((r) => ({
        origin: String(r.origin),
        highWater: Number(r.high_water),
        samples: Number(r.samples),
        auditsPassed: Number(r.audits_passed),
        auditFailures: Number(r.audit_failures),
        rejectedBodies: Number(r.rejected_bodies),
        conflicts: Number(r.conflicts),
      }));
    },
    origin(origin) {
      const r = q.origin.get(origin) as Record<string, number | string> | undefined;
      if (!r) return undefined;
      return {
        origin: String(r.origin),
        highWater: Number(r.high_water),
        auditsPassed: Number(r.audits_passed),
        auditFailures: Number(r.audit_failures),
        rejectedBodies: Number(r.rejected_bodies),
        conflicts: Number(r.conflicts),
      };
    },
    unaudited() {
      return (q.unaudited.all() as unknown as Row[]).map(toDigest);
    },
    putTasks(tasks, source = 'file') {
      return transaction(db, () => {
        for (const t of tasks) {
          q.putTask.run(t.id, canonicalJson(t));
          q.putTaskRow.run(taskHash(t), canonicalJson(t), source);
        }
        return tasks.length;
      });
    },
    putTaskRow(hash, task, source) {
      q.putTaskRow.run(hash, canonicalJson(task), source);
    },
    taskRows() {
      const out = new Map<string, { task: Task; source: string }>();
      for (const r of q.taskRows.all() as { hash: string; json: string; source: string }[])
        out.set(r.hash, {
          task: parseJsonWith(Task, r.json, `${dir}: task row ${r.hash}`),
          source: r.source,
        });
      return out;
    },
    getTaskRows(hashes) {
      const out: TaskReply[] = [];
      for (const hash of hashes) {
        const r = q.taskRow.get(hash) as { json: string } | undefined;
        if (!r) continue;
        const task = parseJsonWith(Task, r.json, `${dir}: task row ${hash}`);
        // A row damaged on disk is not served (the asker would count it against this node).
        if (taskHash(task) === hash) out.push({ hash, task });
      }
      return out;
    },
    missingTaskRows() {
      return (q.missingTaskRows.all() as { hash: string; origins: string }[]).map((r) => ({
        hash: r.hash,
        origins: r.origins.split(',').sort(),
      }));
    },
    tasks() {
      const out = new Map<string, Task>();
      for (const r of q.tasks.all() as { json: string }[]) {
        const t = parseJsonWith(Task, r.json, `${dir}: task`);
        out.set(t.id, t);
      }
      return out;
    },
    getMeta(key) {
      return (q.getMeta.get(key) as { value: string } | undefined)?.value;
    },
    setMeta(key, value) {
      q.setMeta.run(key, value);
    },
    getRows(keys) {
      const out: SampleReply[] = [];
      for (const { origin, seq } of keys) {
        const r = q.get.get(origin, seq) as Row | undefined;
        if (r?.body_state !== 'ok') continue;
        const s = toSample(r);
        // A body file damaged on disk is not served (the asker would count it against this node).
        if (s.body && contentHash(s.body.candidate) === s.digest.contentHash)
          out.push({ origin: r.origin, seq: r.seq, body: s.body });
      }
      return out;
    },
    originSummaries(after, limit) {
      return (q.summaries.all(after ?? '', limit) as Record<string, number | string>[]).map((r) => ({
        origin: String(r.origin),
        highWater: Number(r.highWater),
        maxSeq: Number(r.maxSeq),
        count: Number(r.count),
      }));
    },
    digestsOf(origin, after, limit) {
      const digests = (q.digestsOf.all(origin, after, limit) as unknown as Row[]).map(toDigest);
      const hw = (q.highWater.get(origin) as { high_water: number } | undefined)?.high_water ?? 0;
      return { digests, highWater: hw };
    },
    contentDigest() {
      // Each body's hash is kept beside it (meta_hash): the digest reads no body, so a collector's
      // status (recomputed every second while it collects) costs a scan of short columns, not of
      // every body (that cost 100 MB of reads a second and most of a collector's memory at 20,000
      // samples).
      const h = (q.contentRows.all() as unknown as Row[]).map((r) =>
        [
          r.origin,
          r.seq,
          r.sample_id,
          r.content_hash,
          r.reward,
          r.body_state,
          r.body_state === 'ok' ? (r.meta_hash ?? EMPTY_HASH) : '-',
          r.audit,
          r.quarantined,
        ].join(' '),
      );
      return `sha256:${sha256Hex(h.join('\n'))}`;
    },
    counts() {
      const r = q.counts.get() as Record<string, number>;
      return {
        digests: Number(r.digests),
        samples: Number(r.samples),
        bodies: Number(r.bodies),
        pending: Number(r.pending),
        rejected: Number(r.rejected),
        audited: Number(r.audited),
        origins: Number(r.origins),
      };
    },
    close() {
      if (db.isOpen) db.close();
    },
  };
}
